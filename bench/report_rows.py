"""A run's cells as a report reads them: from its record, or from its snapshot and the columns
beside it (``harness.records.report_rows``), each way in a fresh process, alternated.

    python bench/report_rows.py RUN_DIR [--repeat 7]

``RUN_DIR``: a merged run whose merge made its report (so it holds ``report_rows.json``), as
``bench/scale.py --keep DIR`` leaves one (``DIR/n100000/reports/runs/merged``). Prints each
way's seconds (median and all), its peak RSS, and whether both gave the same rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import ROOT, speed_line

#: One way of reading, in a fresh interpreter: its seconds, peak RSS and the rows' digest.
PROBE = """
import gc, hashlib, json, resource, sys, time
gc.disable()  # as the report reads (core.bulk)
from pathlib import Path
from msgspec.structs import astuple
from harness.records import lines, report_rows, snapshot
from harness.records.store import RunStore
run = Path(sys.argv[1])
start = time.perf_counter()
if sys.argv[2] == "record":
    rows = lines.result_rows(RunStore(run))
else:
    rows = report_rows.read(run, snapshot.stamp(run))
seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # (before the digest's text)
digest = hashlib.sha256(repr([astuple(r) for r in rows or []]).encode()).hexdigest()
print(json.dumps({"seconds": seconds, "rows": len(rows or []), "digest": digest,
                  "rss": rss}))
"""


def probe(run: Path, way: str) -> dict[str, float | int | str]:
    out = subprocess.run([sys.executable, "-c", PROBE, str(run), way], check=True,
                         capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a merged run's folder")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each (default: 7)")
    args = parser.parse_args(argv)
    if not (args.run / "report_rows.json").is_file():
        parser.error(f"{args.run} holds no report_rows.json (merge it without --no-report)")
    print(speed_line())
    found: dict[str, list[dict[str, float | int | str]]] = {"record": [], "columns": []}
    for i in range(args.repeat):
        for way in (("record", "columns") if i % 2 == 0 else ("columns", "record")):
            found[way].append(probe(args.run, way))
    for way, runs in found.items():
        seconds = sorted(float(r["seconds"]) for r in runs)
        print(f"{way}: {' '.join(f'{s:.3f}' for s in seconds)}  median "
              f"{statistics.median(seconds):.3f} s, {runs[0]['rows']} rows, peak "
              f"{max(int(r['rss']) for r in runs) / 1024:.0f} MiB")
    digests = {str(r["digest"]) for runs in found.values() for r in runs}
    print("the same rows both ways" if len(digests) == 1 else "DIFFERENT ROWS")
    print(speed_line())
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())

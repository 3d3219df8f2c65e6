"""Makespan of a mixed workload against its lower bound, before and after the harness knows
the cells' durations.

Writes a case module whose cells sleep for mixed durations (the longest one last, the worst
place for plan order), runs it twice with ``harness run -j SLOTS`` on the host backend and
prints, for each run, the makespan (first case start to last case end, from the record) and
the bound max(longest cell, total / slots). The second run batches and orders by the first
run's durations (the issue's goal: within 1.05 of the bound). ``--cells N``: N cells of mixed
durations instead (0.05-1 s, drawn with a fixed seed, in no particular order).

    python bench/makespan.py [--slots 2] [--cells N] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

DURATIONS = [1.0, 0.5, 1.0, 0.5, 1.0, 0.5, 1.0, 0.5, 1.0, 1.0, 4.0]
MIXED = (0.05, 0.1, 0.2, 0.5, 1.0)  # ``--cells``: each cell one of these

CASE = '''
import time
import pytest

@pytest.mark.parametrize("seconds", {durations!r}, ids={ids!r})
@pytest.mark.parametrize("n", [0])
def test_sleep(seconds, n):
    time.sleep(seconds)
'''


def makespan(run_dir: Path) -> tuple[float, float, int]:
    rows = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    starts = [r["finished_at"] - r["duration"] for r in rows]
    return max(r["finished_at"] for r in rows) - min(starts), sum(
        r["duration"] for r in rows), len(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--cells", type=int, help="mixed durations, this many cells")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.slots < 1 or (args.cells is not None and args.cells < 1):
        parser.error("--slots and --cells must be at least 1")
    rng = random.Random(args.seed)
    durations = DURATIONS if args.cells is None else [
        rng.choice(MIXED) for _ in range(args.cells)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cases = root / "cases"
        cases.mkdir()
        (cases / "pytest.ini").write_text("[pytest]\n")
        # Each cell its own id (equal durations would make equal ids).
        (cases / "test_mix.py").write_text(CASE.format(
            durations=durations, ids=[f"c{i}" for i in range(len(durations))]))
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        (root / "matrix.yaml").write_text(
            f"version: 1\ncases_dir: {cases}\nenvironments:\n"
            f"  host: {{backend: host, python: '{py}', timeout: 60}}\n")
        longest, total = max(durations), sum(durations)
        bound = max(longest, total / args.slots)
        print(f"{len(durations)} cells, {total:.1f} s of work, longest {longest:.1f} s, "
              f"{args.slots} slots: bound {bound:.2f} s")
        for label in ("first run (no durations known)", "second run (durations known)"):
            run_id = "second" if "second" in label else "first"
            subprocess.run([sys.executable, "-m", "harness", "--reports", str(root / "r"),
                            "run", "-m", str(root / "matrix.yaml"), "-j", str(args.slots),
                            "--run-id", run_id, "--no-report"], cwd=root, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            span, work, cells = makespan(root / "r" / "runs" / run_id)
            print(f"{label}: makespan {span:.2f} s = {span / bound:.2f} x bound "
                  f"({cells} cells, {work:.1f} s of case time)")


if __name__ == "__main__":
    main()

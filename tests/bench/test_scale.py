"""bench/scale.py at a tiny size: it generates its matrix and records, runs every step through
the CLI and prints a table with none failed. Timings are the machine's; none is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

#: Every row the table must have (the fixed steps run on the repository's own matrix).
STEPS = ("plan --format json", "merge 3 shards --no-report",
         "merge 3 shards --no-report, shards without tables", "merge 3 shards + report",
         "report RUN --out DIR (every format)", "report RUN (finds the run before)",
         "report RUN --diff PREVIOUS", "history --last 3", "history --last 3 --format json",
         "--help (fixed)", "cases (repo matrix, fixed)", "plan table (repo matrix, fixed)")


def test_scale_bench_runs_every_step_at_a_small_size(tmp_path: Path) -> None:
    # Its temporary folder under tmp_path: nothing is left elsewhere, whatever happens.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "scale.py"), "--sizes", "300", "--shards", "3",
         "--history", "3"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("$ python "), out
    assert "machine: " in out and " cores " in out, out
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in out.splitlines()
            if line.startswith("| ")}
    assert rows.get("step", "").startswith(
        "| step | 300 s | 300 MiB | 300 CPU s (system) | 300 page faults |"), out
    for step in STEPS:
        assert step in rows, f"no row for {step!r}:\n{out}"
        assert "FAILED" not in rows[step], rows[step]
        seconds, mib, cpu, faults = rows[step].split(" | ")[1:5]
        assert float(seconds) > 0 and float(mib) > 0, rows[step]
        # the CPU seconds (user + system) and page faults of the step, read by its wrapper
        total, system = cpu.removesuffix(")").split(" (")
        assert float(total) >= float(system) >= 0 and float(total) > 0, rows[step]
        assert int(faults.replace(",", "")) > 1000, rows[step]  # an interpreter's start alone
    assert "failed:" not in out
    assert not any(tmp_path.glob("harness-scale-*")), "the data was not removed"

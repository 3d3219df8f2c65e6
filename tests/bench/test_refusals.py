"""bench/refusals.py once (``--repeat 1``, its default matrices): every oversized matrix
refused with exit 2 and the line saying why, the repository's matrix planned, every figure
printed. How fast is the machine's to say: no time is compared with a goal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_refusals_bench_prints_each_matrix_refused_or_planned(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "refusals.py"), "--repeat", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")
            for line in proc.stdout.splitlines() if line.startswith("| ")}
    for name, code in (("mutant: refused", "2"), ("values: refused", "2"),
                       ("named: refused", "2"), ("axis: refused", "2"),
                       ("string: refused", "2"), ("nested: refused", "2"),
                       ("matrix.yaml: planned (reference)", "0")):
        assert name in rows, proc.stdout
        seconds, cpu, mib, exit_code = rows[name][2:6]
        assert float(seconds) > 0 and float(cpu) > 0 and float(mib) > 0, rows[name]
        assert exit_code == code, rows[name]
    assert "over the limit" in rows["mutant: refused"][6], rows["mutant: refused"]
    assert "past the limit" in rows["values: refused"][6], rows["values: refused"]
    assert "a value of 1,000,000 characters" in rows["string: refused"][6]
    assert "nested more than 64 levels deep" in rows["nested: refused"][6]

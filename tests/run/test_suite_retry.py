"""A suite session whose process dies with no test running (the machine's fault, not a
test's) is an ``infra`` ERROR that the driver runs again, as it does a case cell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.run.suite_matrix import host_suite

KILLS_ITSELF_ONCE = """\
import os
import pathlib
import signal

MARK = pathlib.Path(__file__).with_name("killed-once")


def pytest_configure(config):
    if not MARK.exists():  # the first session only: as if its machine took it down
        MARK.write_text("")
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_session_killed_once_is_retried_and_ends_with_its_tests_outcomes(
        tmp_path: Path) -> None:
    m = host_suite(tmp_path, {"conftest.py": KILLS_ITSELF_ONCE, "test_s.py": (
        "def test_good():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n")})
    suite = tmp_path / "suite"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
         str(m), "--no-report"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=240, check=False)
    assert (suite / "killed-once").exists()
    (run_dir,) = (tmp_path / "r" / "runs").iterdir()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    first, *rest = rows
    assert (first["variant"], first["outcome"], first["infra"], first.get("attempt", 1)) == (
        "(session)", "ERROR", True, 1)
    assert first["reason"].startswith("process killed by SIGKILL with no test running")
    # In a case cell's words: nothing lost the machine (it said "machine lost, retrying").
    assert ("mine::(session) @cpu (host): retrying (attempt 2): process killed by SIGKILL with "
            "no test running") in proc.stderr, proc.stderr
    assert "machine lost" not in proc.stdout + proc.stderr
    assert [(r["variant"], r["outcome"], r["attempt"]) for r in rest] == [
        ("test_s.py::test_good", "PASS", 2), ("test_s.py::test_bad", "FAIL", 2),
        ("(session)", "FAIL", 2)]
    assert rest[-1]["reason"] == "1 failed, 1 passed"  # as pytest says it
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a test failed: not the machine

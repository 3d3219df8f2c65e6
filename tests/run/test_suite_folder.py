"""A maintainer's suite of hundreds of tests through the CLI: its run folder holds no file
per test and stays small for its size (a suite of thousands in several environments must
fit under tens of MB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.run.suite_matrix import host_suite

TESTS = 400
#: A run folder's bytes on disk per test, at most: the record, its table (cells.sqlite),
#: compat.json, junit.xml, the CSV and pages, a suite's log (the pages' fixed part spread over
#: its tests): about 1,960 here. A file per test (events) takes a block of 4 KiB each.
BYTES_PER_TEST = 2100


def on_disk(folder: Path) -> int:
    """Bytes on disk (as ``du`` counts them: a small file takes a block)."""
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*"))


def test_a_suite_of_hundreds_leaves_no_file_per_test_and_a_small_folder(
        tmp_path: Path) -> None:
    files = {f"test_gen_{f}.py": "".join(
        f"\n\ndef test_{f}_{i}():\n    assert {i} == {i}\n" for i in range(100))
        for f in range(TESTS // 100)}
    files["test_gen_0.py"] += "\n\ndef test_fails():\n    assert 1 == 2\n"
    m = host_suite(tmp_path, files)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
         str(m)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # test_fails, as expected
    assert f"tests: 1 failed, {TESTS} passed" in proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "r" / "runs").iterdir()
    paths = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(paths) < 40, sorted(str(p.relative_to(run_dir)) for p in paths)
    # A test's one event is how it ended: its result line says it; none kept apart.
    assert not (run_dir / "events").exists() and not (run_dir / "events.jsonl").exists()
    size = on_disk(run_dir)
    assert size < BYTES_PER_TEST * (TESTS + 1), {
        str(p.relative_to(run_dir)): p.stat().st_size for p in paths}

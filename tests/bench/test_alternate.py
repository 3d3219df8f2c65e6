"""bench/alternate.py: an older revision against this checkout, alternated, both compiled,
the older one's checkout removed after. Timings are the machine's; none is asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_alternate_runs_both_sides_and_leaves_no_checkout(tmp_path: Path) -> None:
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "alternate.py"), "--old", "HEAD", "--cwd",
         str(tmp_path), "--repeat", "2", "--", "--help"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for side in ("old", "new"):
        assert re.search(rf"^{side}: \d+\.\d\d \d+\.\d\d  median \d+\.\d\d s, peak \d+ MiB$",
                         proc.stdout, re.M), proc.stdout
    assert re.search(r"^new / old: \d+\.\d\d$", proc.stdout, re.M), proc.stdout
    assert "speed: " in proc.stdout
    after = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert after == worktrees  # the older checkout removed
    assert not any(tmp_path.glob("harness-alternate-*"))


def test_a_failing_command_fails_the_comparison(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "alternate.py"), "--old", "HEAD", "--cwd",
         str(tmp_path), "--repeat", "1", "--", "report", "no-such-run"], cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=300, check=False)
    assert proc.returncode == 1 and "the command failed" in proc.stdout, proc.stdout

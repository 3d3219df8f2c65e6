"""bench/alternate.py: an older revision against this checkout, alternated, both compiled,
the older one's checkout removed after. Timings are the machine's; none is asserted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_alternate_runs_both_sides_and_leaves_no_checkout(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "alternate.py"), "--old", "HEAD", "--cwd",
         str(tmp_path), "--repeat", "2", "--", "--help"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for side in ("old", "new"):
        assert re.search(rf"^{side}: \d+\.\d\d \d+\.\d\d  median \d+\.\d\d s, "
                         r"CPU \d+\.\d\d s, peak \d+ MiB$",
                         proc.stdout, re.M), proc.stdout
    assert re.search(r"^new / old: \d+\.\d\d$", proc.stdout, re.M), proc.stdout
    assert "speed: " in proc.stdout
    assert not worktrees(tmp_path)  # the older checkout removed
    assert not any(tmp_path.glob("harness-alternate-*"))


def worktrees(under: Path) -> list[str]:
    """The repository's worktrees under ``under`` (this test's: the tests of this file may
    run at once on two workers, each with a checkout of its own for a while), removed or
    not (a folder deleted without ``git worktree remove`` is still listed)."""
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if line.startswith("worktree ")
            and Path(line.removeprefix("worktree ")).resolve().is_relative_to(
                under.resolve())]


def test_a_failing_command_fails_the_comparison(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "alternate.py"), "--old", "HEAD", "--cwd",
         str(tmp_path), "--repeat", "1", "--", "report", "no-such-run"], cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=300, check=False)
    assert proc.returncode == 1 and "the command failed" in proc.stdout, proc.stdout
    assert not worktrees(tmp_path) and not any(tmp_path.glob("harness-alternate-*"))


def test_a_terminated_comparison_removes_the_older_checkout(tmp_path: Path) -> None:
    """SIGTERM (a CI limit, a kill) while the commands run."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "alternate.py"), "--old", "HEAD", "--cwd",
         str(tmp_path), "--repeat", "1000", "--", "--help"], cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)}, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("$ python -m harness")  # comparing
    assert worktrees(tmp_path)  # its checkout, seen while it compares
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143
    assert not worktrees(tmp_path) and not any(tmp_path.glob("harness-alternate-*"))

"""Nothing a cell or a build starts outlives it, even when the harness is killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.reaper import scratch_prefix, start_time, sweep_scratch
from tests.conftest import DATA, PY, ROOT, write_matrix
from tests.packages import make_sdist

HOST = f"""version: 1
cases_dir: {DATA / 'behaviour'}
environments:
  host: {{backend: host, python: '{PY}', timeout: 300}}
"""


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(path: Path, seconds: float = 120) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)  # the cells' scratch folders, where a test sees them
    return {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(tmp_path / "cache"),
            "TMPDIR": str(tmp_path / "tmp"),
            "CHILD_PID_FILE": str(tmp_path / "child.pid"), "HARNESS_PASS_ENV": "CHILD_PID_FILE",
            **extra}


def harness(tmp_path: Path, matrix: Path, *args: str, **extra: str
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           "run", "-m", str(matrix), *args], cwd=tmp_path,
                          env=env(tmp_path, **extra), capture_output=True, text=True,
                          check=False, timeout=600)


def test_what_a_passing_case_leaves_running_goes_with_it(tmp_path: Path) -> None:
    m = write_matrix(tmp_path / "m.yaml", HOST)
    proc = harness(tmp_path, m, "-k", "leave_child")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    child = wait_for(tmp_path / "child.pid")
    time.sleep(0.2)
    assert not running(child)


def test_a_daemon_that_left_the_cells_session_goes_too(tmp_path: Path) -> None:
    """It left the process group (setsid) but carries the cell's token: the token decides."""
    m = write_matrix(tmp_path / "m.yaml", HOST)
    proc = harness(tmp_path, m, "-k", "leave_daemon")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    daemon = wait_for(tmp_path / "child.pid")
    time.sleep(0.2)
    assert not running(daemon)


@pytest.mark.parametrize("case", ["child_then_hang", "daemon_then_hang"])
def test_a_run_killed_mid_cell_is_reaped_by_the_next(tmp_path: Path, case: str) -> None:
    m = write_matrix(tmp_path / "m.yaml", HOST)
    victim = subprocess.Popen([sys.executable, "-m", "harness", "--reports",
                               str(tmp_path / "r"), "run", "-m", str(m), "-k", case],
                              cwd=tmp_path, env=env(tmp_path), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    child = wait_for(tmp_path / "child.pid")
    os.kill(victim.pid, signal.SIGKILL)  # the harness alone, as the OOM killer would
    victim.wait()
    time.sleep(0.5)
    assert running(child), "the background process should have outlived the killed harness"
    left = list((tmp_path / "tmp").glob("harness-cell-*"))
    assert len(left) == 1 and (left[0] / "events.jsonl").is_file(), left
    after = harness(tmp_path, m, "-k", "test_pass")
    assert "reaped" in after.stdout, after.stdout + after.stderr
    time.sleep(0.2)
    assert not running(child)
    assert not list((tmp_path / "tmp").glob("harness-cell-*"))  # its scratch went too


def test_scratch_folders_are_swept_only_when_their_harness_is_gone(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(gone.stdout)
    mine = tmp_path / f"{scratch_prefix('0123456789ab')}x1"
    dead = tmp_path / f"harness-cell-0123456789ab-{dead_pid}.{start_time(os.getpid())}-x2"
    recycled = tmp_path / f"harness-cell-0123456789ab-{os.getpid()}.1-x3"  # my pid, not me
    other = tmp_path / "harness-cell-0123456789ab-x4"  # no owner in its name: not ours to judge
    unknown = tmp_path / f"harness-cell-0123456789ab-{dead_pid}.0-x5"  # its start was unknown
    for folder in (mine, dead, recycled, other, unknown):
        folder.mkdir()
        (folder / "cell.log").write_text("...")
    swept = sweep_scratch(tmp_path)
    assert sorted(swept) == sorted([dead, recycled])
    assert mine.is_dir() and other.is_dir() and unknown.is_dir()
    assert not dead.exists() and not recycled.exists()


def test_a_run_killed_mid_build_is_reaped_by_the_next(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_sdist(wheels, "slowbuild", "0.1", {"setup.py": (
        "import os, time\n"
        "open(os.environ['BUILD_PID_FILE'], 'w').write(str(os.getpid()))\n"
        "time.sleep(300)\n")})
    building = write_matrix(tmp_path / "build.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\nenvironments:\n"
        f"  slow: {{backend: uv, python: '{PY}', packages: [slowbuild]}}\n"))
    pid_file = tmp_path / "build.pid"
    victim = subprocess.Popen(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
         str(building), "-k", "test_pass", "--find-links", str(wheels)], cwd=tmp_path,
        env=env(tmp_path, BUILD_PID_FILE=str(pid_file)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    setup_py = wait_for(pid_file, 300)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    time.sleep(0.5)
    assert running(setup_py), "the build should have outlived the killed harness"
    after = harness(tmp_path, write_matrix(tmp_path / "m.yaml", HOST), "-k", "test_pass")
    assert "reaped" in after.stdout, after.stdout + after.stderr
    time.sleep(0.2)
    assert not running(setup_py)
    assert reap_in(tmp_path / "tmp") == "{}"  # nothing left to reap


def reap_in(tmp: Path) -> str:
    """What a harness whose temporary folder is ``tmp`` reaps, as it prints it."""
    return subprocess.run([sys.executable, "-c", "from harness.core.reaper import reap; "
                           "print(reap())"], env={**os.environ, "PYTHONPATH": str(ROOT),
                                                  "TMPDIR": str(tmp)},
                          capture_output=True, text=True, check=True).stdout.strip()


OWNER = """import sys, time
from harness.envs.base import start_group
print(start_group([sys.executable, "-c", "import time; time.sleep(300)"], {}).popen.pid,
      flush=True)
time.sleep(300)
"""


def test_a_group_is_reaped_once_its_owner_is_gone_and_only_then(tmp_path: Path) -> None:
    """Its token names its owner: nothing is written, so an owner killed right after it started
    a group leaks nothing; a live owner's group, or another temporary folder's, is left alone."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], env=env(tmp_path),
                             stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    child = int(owner.stdout.readline())
    try:
        assert reap_in(tmp_path / "tmp") == "{}" and running(child)  # its owner runs
        owner.kill()
        owner.wait()
        (tmp_path / "other").mkdir()
        assert reap_in(tmp_path / "other") == "{}" and running(child)
        assert f"[{child}]" in reap_in(tmp_path / "tmp")
        time.sleep(0.2)
        assert not running(child)
    finally:
        owner.kill()
        if running(child):
            os.kill(child, signal.SIGKILL)

"""The environment lock: a second run waits, says for whom, and gives up in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.errors import EnvBuildError
from harness.envs.base import locked
from tests.conftest import ROOT

HOLD = """
import sys, time
from pathlib import Path
from harness.envs.base import locked
with locked(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_held_lock_is_waited_for_named_and_given_up_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / "env.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), "harness-run-A"],
                              env={**os.environ, "PYTHONPATH": str(ROOT)},
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(EnvBuildError) as caught, locked(lock, timeout=1.0, notice=0.2):
            pass
        assert time.monotonic() - started < 10
        message = str(caught.value)
        assert message.startswith(f"{lock}: still locked after 1 s by pid {holder.pid} on ")
        assert "harness-run-A" in message and "\n" not in message
        assert f"harness: waiting for {lock}, held by pid {holder.pid}" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    with locked(lock, timeout=5):  # the holder is gone: the lock is free again
        assert (tmp_path / "env.lock.holder").read_text().startswith(f"pid {os.getpid()} ")
    assert not (tmp_path / "env.lock.holder").exists()


def test_a_thread_of_the_same_run_waits_without_naming_its_own_process(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """envs check resolves four environments at a time in threads that share a resolver:
    "waiting for ..., held by pid <its own pid>" told the user nothing."""
    import threading

    lock, held, release = tmp_path / "resolver.lock", threading.Event(), threading.Event()

    def hold() -> None:
        with locked(lock):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(10)
    threading.Timer(0.5, release.set).start()
    with locked(lock, timeout=10, notice=0.1):
        pass
    thread.join()
    assert "waiting for" not in capsys.readouterr().err


def test_a_cache_folder_that_cannot_be_made_is_one_line_not_a_backend_bug(
        tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("")  # HARNESS_CACHE_DIR naming a file
    with pytest.raises(EnvBuildError, match=r"^cache folder .*/cache/uv: Not a directory$"), \
            locked(tmp_path / "cache" / "uv" / "env.lock"):
        pass

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

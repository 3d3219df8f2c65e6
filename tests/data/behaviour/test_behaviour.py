"""Cases that misbehave on purpose, to test how the harness classifies them."""

from __future__ import annotations

import ctypes
import json
import os
import time
from pathlib import Path

from harness_case import Signature

BOOM = Signature("boom", "ValueError", r"documented boom")


def test_pass() -> None:
    assert 1 + 1 == 2


@BOOM.reproduces
def test_reproduces() -> None:
    raise ValueError("the documented boom happened")


@BOOM.reproduces
def test_other_error() -> None:
    raise ValueError("something else entirely")


def test_segfault() -> None:
    ctypes.string_at(0)


def test_hang() -> None:
    time.sleep(600)


def test_os_exit() -> None:
    os._exit(3)


def test_gpu_log() -> None:
    """Appends which GPU it was given and when, so a test can check exclusivity."""
    start = time.time()
    time.sleep(0.4)
    line = {"gpu": os.environ["CUDA_VISIBLE_DEVICES"], "start": start, "end": time.time(),
            "cell": os.environ["HARNESS_CELL_ID"], "node": os.environ["HARNESS_NODE"],
            "hardware": os.environ["HARNESS_HARDWARE"]}
    with open(Path(os.environ["GPU_LOG"]), "a") as fh:
        fh.write(json.dumps(line) + "\n")


def test_gpu_hold() -> None:
    """Says where it started, then holds its GPU for a while: long enough to lose its node."""
    here = {"gpu": os.environ["CUDA_VISIBLE_DEVICES"], "node": os.environ["HARNESS_NODE"],
            "cell": os.environ["HARNESS_CELL_ID"], "time": time.time()}
    with open(Path(os.environ["GPU_LOG"]), "a") as fh:
        fh.write(json.dumps({"event": "start", **here}) + "\n")
    time.sleep(float(os.environ.get("HOLD_SECONDS", "4")))
    with open(Path(os.environ["GPU_LOG"]), "a") as fh:
        fh.write(json.dumps({"event": "end", **here, "time": time.time()}) + "\n")


def test_wait_a() -> None:
    time.sleep(0.7)


def test_wait_b() -> None:
    time.sleep(0.7)


def test_wait_c() -> None:
    time.sleep(0.7)


def test_wait_d() -> None:
    time.sleep(0.7)


def test_env_dump(harness_record) -> None:  # type: ignore[no-untyped-def]
    """Fails with everything it can see: what a careless case leaks into logs and reports."""
    seen = dict(os.environ)
    harness_record("environ", seen)
    print(json.dumps(seen))
    raise AssertionError(json.dumps(seen))


def _background_sleep(session: bool = False) -> int:
    import subprocess

    # never waited for: left behind on purpose; `session`: in a session of its own (setsid),
    # out of the cell's process group, as a daemon does
    child = subprocess.Popen(["sleep", "300"], start_new_session=session)
    with open(Path(os.environ["CHILD_PID_FILE"]), "w") as fh:
        fh.write(str(child.pid))
    return child.pid


def test_leave_child() -> None:
    """Passes, leaving a background process in its group."""
    _background_sleep()


def test_leave_daemon() -> None:
    """Passes, leaving a background process that left the cell's session (setsid)."""
    _background_sleep(session=True)


def test_daemon_then_hang() -> None:
    """Starts a process in a session of its own, then hangs: the harness gets killed."""
    _background_sleep(session=True)
    time.sleep(300)


def test_child_then_hang() -> None:
    """Starts a background process, then hangs: the harness gets killed meanwhile."""
    _background_sleep()
    time.sleep(300)


def test_allocate() -> None:
    """Wants a gigabyte: past a 256m limit it must not get it."""
    block = bytearray(1024 ** 3)
    assert len(block) == 1024 ** 3


def test_variables(harness_record, harness_variables) -> None:  # type: ignore[no-untyped-def]
    """Records the cell's variable axes as the fixture and the environment give them."""
    harness_record("variables", harness_variables)
    harness_record("init_device", os.environ.get("INIT_DEVICE"))


def test_flaky_once() -> None:
    """Fails the first time it runs (the flag file does not exist yet), passes after."""
    flag = Path(os.environ["FLAKY_FLAG"])
    if not flag.exists():
        flag.write_text("failed once")
        raise AssertionError("first try fails")

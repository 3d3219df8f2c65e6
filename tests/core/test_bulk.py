"""side_by_side: both halves done on return, the child's failure raised in the parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.core.bulk import side_by_side
from harness.core.errors import HarnessError, UsageError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2,
                                reason="needs fork and a second core (else it runs in order)")


def _writer(path: Path) -> Callable[[], None]:
    def write() -> None:
        path.write_text(str(os.getpid()))
    return write


def test_both_halves_have_run_on_return_the_first_in_another_process(tmp_path: Path) -> None:
    side_by_side(_writer(tmp_path / "there"), _writer(tmp_path / "here"), "writing")
    assert int((tmp_path / "here").read_text()) == os.getpid()
    assert int((tmp_path / "there").read_text()) != os.getpid()


def test_the_childs_value_comes_back_and_a_value_it_cannot_send_is_an_error() -> None:
    value = side_by_side(lambda: ["against expectations", os.getpid()], lambda: None, "judging")
    assert value[0] == "against expectations"
    assert value[1] != os.getpid()  # made in the child
    with pytest.raises(RuntimeError, match=r"(?s)judging \(in a second process\) failed:.*"
                                           r"its value could not be sent back"):
        side_by_side(lambda: threading.Lock(), lambda: None, "judging")


class _KeywordOnly(HarnessError):
    """Pickles, yet does not unpickle (its ``__init__`` wants a keyword)."""

    def __init__(self, *, why: str) -> None:
        super().__init__(why)


def test_an_error_that_cannot_come_back_as_it_was_comes_back_in_words() -> None:
    def there() -> None:
        raise _KeywordOnly(why="matrix.yaml:3: torch: not a version")

    with pytest.raises(RuntimeError, match=r"writing failed: .*matrix.yaml:3: torch"):
        side_by_side(there, lambda: None, "writing")


def test_a_harness_error_in_the_child_is_raised_here_as_it_was() -> None:
    def there() -> None:
        raise UsageError("compat.json: no space left on device")

    with pytest.raises(UsageError, match="no space left on device"):
        side_by_side(there, lambda: None, "writing compat.json")


def test_a_bug_in_the_child_comes_back_with_its_traceback() -> None:
    def there() -> None:
        {}["missing"]

    with pytest.raises(RuntimeError, match=r"(?s)writing junit.xml \(in a second process\) "
                                           r"failed:.*KeyError: 'missing'"):
        side_by_side(there, lambda: None, "writing junit.xml")


@pytest.mark.parametrize("error", [KeyboardInterrupt, BrokenPipeError])
def test_an_interrupt_or_a_closed_pipe_in_the_child_is_raised_here_as_it_was(
        error: type[BaseException]) -> None:
    """The CLI answers these itself (130; 141, quietly, for ``harness merge | head``): a
    merge or a report's half in a child raises them here as they were, not as a bug."""
    def there() -> None:
        raise error()

    with pytest.raises(error):
        side_by_side(there, lambda: None, "merging")


def test_interrupted_here_the_child_is_stopped_and_waited_for(tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM (the CLI raises KeyboardInterrupt) while the child works: it does
    not go on writing after this process has said it stopped."""
    late = tmp_path / "late"

    def there() -> None:
        time.sleep(5)
        late.write_text("written after the interrupt")

    def here() -> None:
        raise KeyboardInterrupt

    assert threading.active_count() == 1, threading.enumerate()  # or no child to stop
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        side_by_side(there, here, "merging")
    assert time.monotonic() - started < 4
    time.sleep(0.2)
    assert not late.exists()


def test_a_child_killed_without_a_word_is_an_error_naming_the_signal() -> None:
    with pytest.raises(HarnessError, match=r"writing the CSV: .*killed by signal 9"):
        side_by_side(lambda: os.kill(os.getpid(), signal.SIGKILL), lambda: None,
                     "writing the CSV")


def test_an_error_here_waits_for_the_child_and_is_raised(tmp_path: Path) -> None:
    def here() -> None:
        raise UsageError("bad page")

    with pytest.raises(UsageError, match="bad page"):
        side_by_side(_writer(tmp_path / "there"), here, "writing")
    assert (tmp_path / "there").is_file()  # the child finished before the error came out


def test_with_another_thread_running_both_run_here_in_order(tmp_path: Path) -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        order: list[str] = []
        side_by_side(lambda: order.append(f"there {os.getpid()}"),
                     lambda: order.append(f"here {os.getpid()}"), "writing")
    finally:
        stop.set()
        other.join()
    assert order == [f"there {os.getpid()}", f"here {os.getpid()}"]


def test_what_the_child_prints_reaches_a_pipe_before_the_parent_goes_on() -> None:
    """stdout to a pipe is written a block at a time, and the child ends without writing
    its buffers (``os._exit``): what it printed is flushed first."""
    code = ("from harness.core.bulk import side_by_side\n"
            "side_by_side(lambda: print('from the child'), lambda: None, 'printing')\n"
            "print('after')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout
    assert out == "from the child\nafter\n"

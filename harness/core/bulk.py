"""Work over a fleet's records: without the cyclic garbage collector, on both cores.

Reading 100,000 result lines makes millions of small objects, none in a cycle; the collector
walks all of them again and again as they pile up (on a 2-core runner that was 60% of reading
a record). The batch commands (plan, merge, report, history, baseline) and the report a run
writes at its end pause it; reference counting still frees everything as usual.

A report's outputs are independent once its data is in memory: ``side_by_side`` writes one
share of them in a forked copy of the process while this one writes the rest (threads would
take turns on the GIL; a forked copy needs no data sent to it). With nothing to do here
(``lambda: None``), it runs work in a process of its own that ends without freeing what it
made (the report's halves, the merge: a fleet's rows take a tenth of a second to free).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from harness.core.errors import HarnessError

T = TypeVar("T")


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def side_by_side(there: Callable[[], T], here: Callable[[], None], what: str) -> T:
    """``there`` in a forked child while ``here`` runs in this process; both have finished on
    return, which is ``there``'s value (pickled back: it must pickle; keep it small), and an
    error in either is raised here: the child's as it was (a HarnessError, an interrupt, a
    reader gone from its pipe), or a RuntimeError holding its traceback (a bug). Interrupted
    here (Ctrl-C; SIGTERM, which the CLI makes one), the child is stopped and waited for, not
    left writing after this process has said it stopped. ``what``: what ``there`` does, for
    the message when the child dies without a word (killed). One after the other where
    forking is not safe or gains nothing: one core, no ``fork``, other threads running (a
    fork copies their locks, held or not)."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or threading.active_count() > 1:
        value = there()
        here()
        return value
    sys.stdout.flush()  # or the child's exit would write what is buffered a second time
    sys.stderr.flush()
    read, write = os.pipe()
    # An interrupt is held from the fork until each side is where it answers it: one that
    # reached the child before, in its caller's code, would run the rest of that code twice.
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child; its work is checked by what it wrote)
        code = 1
        try:  # whatever happens, the child ends here: never in its caller's code
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
                os.close(read)
                code, payload = _outcome(there, what)
                with os.fdopen(write, "wb") as fh:
                    fh.write(payload)
            finally:
                # What it printed (stdout to a pipe or a file is written a block at a
                # time), before the parent goes on: os._exit writes no buffer.
                for stream in (sys.stdout, sys.stderr):
                    with contextlib.suppress(BaseException):
                        stream.flush()
        finally:  # (a second interrupt, raised while the first was answered, ends here too)
            os._exit(code)
    os.close(write)
    stopped = False  # asked once: a second SIGTERM would interrupt its answer to the first
    try:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
            here()
        except KeyboardInterrupt:
            _stop(pid)
            stopped = True
            raise
        finally:  # the child's end: its value or its error (after a stop: what it sent)
            with os.fdopen(read, "rb") as fh:
                payload = fh.read()
    except KeyboardInterrupt:  # also while waiting for the child
        if not stopped:
            _stop(pid)
        raise
    finally:
        _, status = os.waitpid(pid, 0)
    if status != 0 and not payload:
        raise HarnessError(f"{what}: its process ended abnormally ({_status(status)})")
    try:
        done, value = pickle.loads(payload)
    except (EOFError, pickle.UnpicklingError):  # nothing, or cut short: killed while writing
        raise HarnessError(f"{what}: its process ended abnormally ({_status(status)})") from None
    if not done:
        raise value
    return value


_INTERRUPTS = {signal.SIGINT, signal.SIGTERM}
#: What comes back from the child as it was raised there: the user's errors, an interrupt
#: (Ctrl-C reaches both processes), a reader that left the pipe (``harness merge | head``).
_AS_RAISED = (HarnessError, KeyboardInterrupt, BrokenPipeError)


def _outcome(there: Callable[[], T], what: str) -> tuple[int, bytes]:
    """In the child: ``there``'s exit code and its value or error, pickled for the parent."""
    try:
        value = there()
        try:
            return 0, pickle.dumps((True, value))
        except Exception as exc:  # its work done, its value cannot travel (a bug)
            raise RuntimeError(f"{what}: its value could not be sent back: {exc!r}") from None
    except BaseException as exc:  # everything goes back to the parent
        failure = exc if isinstance(exc, _AS_RAISED) else RuntimeError(
            f"{what} (in a second process) failed:\n{traceback.format_exc()}")
        try:  # as the parent will read it (an exception may pickle, yet not unpickle)
            payload = pickle.dumps((False, failure))
            pickle.loads(payload)
        except Exception:
            payload = pickle.dumps((False, RuntimeError(f"{what} failed: {exc!r}")))
        return 1, payload


def _stop(pid: int) -> None:
    """The child asked to stop (SIGTERM: under the CLI, an interrupt, as here)."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"

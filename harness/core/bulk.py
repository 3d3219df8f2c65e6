"""Work over a fleet's records: without the cyclic garbage collector, on both cores.

Reading 100,000 result lines makes millions of small objects, none in a cycle; the collector
walks all of them again and again as they pile up (on a 2-core runner that was 60% of reading
a record). The batch commands (plan, merge, report, history, baseline) and the report a run
writes at its end pause it; reference counting still frees everything as usual.

A report's outputs are independent once its data is in memory: ``side_by_side`` writes one
share of them in a forked copy of the process while this one writes the rest (threads would
take turns on the GIL; a forked copy needs no data sent to it).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
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
    error in either is raised here: the child's as it was (a HarnessError), or a RuntimeError
    holding its traceback (a bug). ``what``: what ``there`` does, for the message when the
    child dies without a word (killed). One after the other where forking is not safe or
    gains nothing: one core, no ``fork``, other threads running (a fork copies their locks,
    held or not)."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or threading.active_count() > 1:
        value = there()
        here()
        return value
    sys.stdout.flush()  # or the child's exit would write what is buffered a second time
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child; its work is checked by what it wrote)
        os.close(read)
        code, payload = 0, b""
        try:
            value = there()
            try:
                payload = pickle.dumps((True, value))
            except Exception as exc:  # its work done, its value cannot travel (a bug)
                raise RuntimeError(f"{what}: its value could not be sent back: {exc!r}"
                                   ) from None
        except BaseException as exc:  # everything goes back to the parent
            code = 1
            failure = exc if isinstance(exc, HarnessError) else RuntimeError(
                f"{what} (in a second process) failed:\n{traceback.format_exc()}")
            try:  # as the parent will read it (an exception may pickle, yet not unpickle)
                payload = pickle.dumps((False, failure))
                pickle.loads(payload)
            except Exception:
                payload = pickle.dumps((False, RuntimeError(f"{what} failed: {exc!r}")))
        try:
            with os.fdopen(write, "wb") as fh:
                fh.write(payload)
        finally:
            # What it printed (stdout to a pipe or a file is written a block at a time),
            # before the parent goes on: os._exit writes no buffer.
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)
    os.close(write)
    try:
        here()
    finally:
        with os.fdopen(read, "rb") as fh:
            payload = fh.read()
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


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"

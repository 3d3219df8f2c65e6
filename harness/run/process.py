"""The one loop that watches a pytest process to its end, for a batch of cases and a suite's
session alike: read it each second, kill it when overdue or hung on exit, say how it ended."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from harness.core.errors import InfraError
from harness.envs import Process
from harness.run.supervise import ProcessGuard
from harness.run.watch import EXIT_GRACE, Watch

T = TypeVar("T")
SLICE = 1.0  # how often a running process's events are read: results stream out this fast

#: Why the harness killed the process: it passed its timeout, every result was in and it
#: hung on the way out, or the caller asked (``stop``).
Killed = Literal["timeout", "settled", "stopped"]


@dataclass(frozen=True)
class Ended:
    code: int  # the exit status; -9 when it would not say
    killed: Killed | None = None  # None: it ended on its own
    lost: str = ""  # the machine failed while it ran (the backend's error)


def watch_process(process: Process, watch: Watch, guard: ProcessGuard, *,
                  tick: Callable[[], Iterator[T]], settled: Callable[[], bool],
                  stop: Callable[[], bool] = lambda: False) -> Generator[T, None, Ended]:
    """Wait for ``process``, yielding what ``tick`` yields each ``SLICE``; kill it once
    ``settled()`` and done or quiet, once overdue, or on ``stop()``. Raises ``Cancelled``."""
    code: int | None = None
    killed: Killed | None = None
    try:
        with guard.watching(process):
            while code is None:
                try:
                    code = process.wait(SLICE)
                except InfraError as exc:
                    process.kill()
                    return Ended(-9, lost=str(exc))
                if code is not None:
                    break
                yield from tick()
                if stop():
                    killed = "stopped"
                elif settled() and (watch.ended
                                    or time.time() > watch.last_activity + EXIT_GRACE):
                    killed = "settled"
                elif watch.overdue():
                    killed, watch.timed_out = "timeout", True
                if killed is not None:
                    process.kill()
                    code = process.wait(60)
    except GeneratorExit:  # whoever listened stopped (an environment's check broke it)
        process.kill()
        with contextlib.suppress(InfraError):  # a machine that stopped answering: gone
            process.wait(60)
        raise
    guard.check()
    watch.oom = bool(getattr(process, "oom_killed", False))
    return Ended(-9 if code is None else code, killed)

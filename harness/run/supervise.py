"""What a machine keeps while it runs cells: their live processes (Ctrl-C kills every one)
and the environments it realized (once each)."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError
from harness.envs import Backend, Environment, Process
from harness.plan.cells import Cell


class Cancelled(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The executor was shut down while the cell ran; its process group is gone."""


class ProcessGuard:
    """The processes cells have running, so that Ctrl-C or SIGTERM kills every one of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[Any] = set()
        self.cancelled = threading.Event()

    @contextmanager
    def watching(self, process: Process) -> Iterator[None]:
        """Ctrl-C or SIGTERM kills ``process`` while the block runs."""
        with self._lock:
            self._live.add(process)
        if self.cancelled.is_set():  # started while shutting down
            process.kill()
        try:
            yield
        finally:
            with self._lock:
                self._live.discard(process)

    def cancel(self) -> None:
        self.cancelled.set()
        with self._lock:
            live = list(self._live)
        for process in live:
            process.kill()

    def check(self) -> None:
        """``Cancelled`` when the executor was shut down: what the process said is no result."""
        if self.cancelled.is_set():
            raise Cancelled


@dataclass(frozen=True)
class Realized:
    env: Environment | None
    error: str = ""  # why there is no environment
    log: str = ""  # a backend bug's traceback
    built: bool = False  # built by this call
    # A new environment's check beside its first cells, whose results wait for it (``settled``)
    checking: Future[Environment] | None = None


def settled(realized: Realized) -> Realized:
    """``realized`` once its check has ended: the checked environment, or the error."""
    if realized.checking is None:
        return realized
    # Waits; never raises what the check raised (each raise lengthens its shared traceback).
    failure = realized.checking.exception()
    if failure is None:
        return Realized(realized.checking.result(), built=realized.built)
    return _failed(failure)


def _failed(exc: BaseException) -> Realized:
    if isinstance(exc, HarnessError):
        return Realized(None, str(exc))
    # a backend bug: reported on the cells, its traceback kept
    return Realized(None, "backend bug while realizing the environment: "
                    f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc)))


class EnvCache:
    """Environments realized in this process, once each (a failure too), however many cells
    ask at once; a new one is handed out while its check runs (``Realized.checking``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, Realized] = {}

    def realize(self, cell: Cell, backend: Backend) -> Realized:
        key = f"{cell.env.backend}:{cell.env.key}:{cell.env.name}"
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._done:
                # As first realized: a later batch must not call one built in this run "up to date"
                return self._done[key]
            try:
                realizing = backend.begin(cell.env)
                outcome = Realized(realizing.env, built=realizing.env.built,
                                   checking=realizing.checked)
            except Exception as exc:
                outcome = _failed(exc)
            self._done[key] = outcome
        if outcome.checking is not None:
            outcome.checking.add_done_callback(lambda _: self._settle(key, outcome))
        return outcome

    def _settle(self, key: str, checking: Realized) -> None:
        with self._lock:
            self._done[key] = settled(checking)

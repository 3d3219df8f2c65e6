"""Executors: where cells run. ``submit(batch)`` gives a future per cell, resolved as it ends
or raising ``InfraError`` when its machine was lost; a suite's tests wait in ``partials()``."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

from harness.core.results import CellRun
from harness.plan.cells import Cell


class Executor(Protocol):
    name: str
    queues: bool  # whether ``submit`` can give a batch to processes drawing from one queue

    @property
    def targets(self) -> tuple[str, ...]: ...  # what ``auto`` hardware becomes: cpu, each arch

    @property
    def serves(self) -> frozenset[str]: ...  # each target a cell may name (sm_90a on sm_90)

    @property
    def capacity(self) -> int: ...  # how many batches can run at once

    def slots_for(self, cell: Cell) -> int: ...  # the most processes that can draw its queue

    def describe(self) -> dict[str, object]: ...  # what ran the cells, for the run record

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1, draws: int = 1
               ) -> list[Future[CellRun]]:
        """``draws``: how many tasks draw the batch's cells from one queue (``queues``)."""

    def partials(self) -> list[CellRun]: ...  # a suite's tests since the last call

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for (or, with ``cancel``, kill) what runs, and release the machines."""


class Partials:
    """What both executors share: each cell's run onto its future as it ends; a suite's
    tests' runs (no planned cell) queued for ``partials``."""

    def __init__(self) -> None:
        self._partials: deque[CellRun] = deque()

    def partials(self) -> list[CellRun]:
        # deque's append and popleft are atomic: the executor's threads add while this takes
        return [self._partials.popleft() for _ in range(len(self._partials))]

    def _deliver(self, run: CellRun, futures: dict[str, Future[CellRun]]) -> None:
        future = futures.get(run.result.cell_id)
        if future is None:  # a suite's test: recorded as it ends, before its session
            self._partials.append(run)
        else:
            future.set_result(run)  # the driver records it now

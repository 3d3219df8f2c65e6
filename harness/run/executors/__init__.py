"""Executors: where cells run. ``submit(cells) -> [Future[CellRun], ...]`` and nothing more.

``cells`` is a batch of one environment and hardware target, for one slot; each cell's future
resolves as that cell ends, or raises ``InfraError`` when its machine was lost (the driver
decides whether to retry). A suite's tests' runs, no planned cell's, wait in ``partials()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

from harness.core.results import CellRun
from harness.plan.cells import Cell


class Executor(Protocol):
    name: str
    #: Whether ``submit`` can give one batch to several processes drawing from one queue.
    queues: bool

    @property
    def targets(self) -> tuple[str, ...]:
        """What ``auto`` hardware becomes: the CPU and each GPU architecture there is."""

    @property
    def serves(self) -> frozenset[str]:
        """Every hardware target a cell may name and still run (sm_90a on an sm_90 GPU)."""

    @property
    def capacity(self) -> int:
        """How many batches can run at once (slots, or the cluster's CPUs and GPUs)."""

    def slots_for(self, cell: Cell) -> int:
        """How many of those slots can run ``cell`` (its hardware): the most processes that
        draw one queue of its batch at once."""

    def describe(self) -> dict[str, object]:
        """For the run record: what ran the cells."""

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1, draws: int = 1
               ) -> list[Future[CellRun]]:
        """``draws``: how many tasks (a slot each, a process at a time) draw the batch's
        cells from one queue (``queues`` executors; one task for the others)."""

    def partials(self) -> list[CellRun]:
        """The runs of no planned cell (a suite's tests) that came since the last call, in
        order, each before its session's own future resolves."""

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for (or, with ``cancel``, kill) what runs, and release the machines."""


EXECUTORS = ("local", "ray")

"""Executors: where cells run. ``submit(cells) -> [Future[CellRun], ...]`` and nothing more.

``cells`` is a batch: cells of one environment and hardware target that one pytest process
may run one after the other (a batch of one is a cell alone); it takes one slot, and each
cell's future resolves as that cell ends. ``local`` runs batches on this machine's slots;
``ray`` runs each as a Ray task on a node with the right GPU. A future that raises
``InfraError`` lost its machine (a Ray node died): the driver decides whether to retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

from harness.core.results import CellRun
from harness.plan.cells import Cell


class Executor(Protocol):
    name: str

    @property
    def targets(self) -> tuple[str, ...]:
        """What ``auto`` hardware becomes: the CPU and each GPU architecture there is."""

    @property
    def serves(self) -> frozenset[str]:
        """Every hardware target a cell may name and still run (sm_90a on an sm_90 GPU)."""

    @property
    def capacity(self) -> int:
        """How many batches can run at once (slots, or the cluster's CPUs and GPUs)."""

    def describe(self) -> dict[str, object]:
        """For the run record: what ran the cells."""

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1
               ) -> list[Future[CellRun]]: ...

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for (or, with ``cancel``, kill) what runs, and release the machines."""


EXECUTORS = ("local", "ray")

"""Executors: where cells run. ``submit(cell) -> Future[CellRun]`` and nothing more.

``local`` runs cells on this machine's slots; ``ray`` runs each cell as a Ray task on a node
with the right GPU. A future that raises ``InfraError`` lost its machine (a Ray node died):
the driver decides whether to retry.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from harness.cellrun import CellRun
from harness.plan import Cell


class Executor(Protocol):
    name: str

    @property
    def targets(self) -> tuple[str, ...]:
        """What ``auto`` hardware becomes: the CPU and each GPU architecture there is."""

    @property
    def serves(self) -> frozenset[str]:
        """Every hardware target a cell may name and still run (sm_90a on an sm_90 GPU)."""

    def describe(self) -> dict[str, object]:
        """For the run record: what ran the cells."""

    def submit(self, cell: Cell, *, run_id: str, attempt: int = 1) -> Future[CellRun]: ...

    def shutdown(self, *, cancel: bool = False) -> None:
        """Wait for (or, with ``cancel``, kill) what runs, and release the machines."""


EXECUTORS = ("local", "ray")

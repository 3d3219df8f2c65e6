"""Slot bookkeeping only: no threads, no processes. The local executor owns the loop."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from harness.plan.cells import Cell
from harness.plan.hardware import arch_serves
from harness.run.queue import CellQueue


@dataclass(frozen=True, kw_only=True)
class Slot:
    name: str
    gpu: int | None = None
    arch: str | None = None

    def fits(self, cell: Cell) -> bool:
        # One GPU per GPU cell, of the architecture the cell targets; CPU cells on CPU slots.
        if self.gpu is None or self.arch is None:
            return cell.hardware == "cpu"
        return arch_serves(self.arch, cell.hardware)


@dataclass(frozen=True, kw_only=True, eq=False)
class Task:
    """One attempt at a batch of cells; compared by identity (a retried cell is a new task)."""

    cells: tuple[Cell, ...]
    run_id: str
    attempt: int = 1
    queue: CellQueue | None = None  # shared by the tasks drawing ``cells`` from it

    @property
    def cell(self) -> Cell:
        return self.cells[0]


def _wanted(task: Task) -> int:
    """The slots a task can use: a CPU suite's xdist workers; one for anything else."""
    suite = task.cell.case.suite
    return suite.workers if suite is not None and task.cell.hardware == "cpu" else 1


def make_slots(jobs: int, gpus: Iterable[tuple[int, str]]) -> tuple[Slot, ...]:
    cpu = [Slot(name=f"cpu{i}") for i in range(max(1, jobs))]
    return (*cpu, *(Slot(name=f"gpu{index}", gpu=index, arch=arch) for index, arch in gpus))


class Scheduler:
    def __init__(self, slots: Iterable[Slot]) -> None:
        self.slots = tuple(slots)
        self.pending: deque[Task] = deque()
        self.slot_to_task: dict[Slot, Task] = {}

    def assign(self) -> list[tuple[Slot, Task]]:
        """Give each free slot the first pending task it fits; then spare CPU slots to the
        suites just started that want xdist workers (``width``)."""
        out = []
        for slot in self.slots:
            if slot in self.slot_to_task:
                continue
            for task in self.pending:
                if slot.fits(task.cell):
                    self.pending.remove(task)
                    self.slot_to_task[slot] = task
                    out.append((slot, task))
                    break
        spare = [s for s in self.slots if s.gpu is None and s not in self.slot_to_task]
        for _, task in out:
            while spare and self.width(task) < _wanted(task):
                self.slot_to_task[spare.pop(0)] = task
        return out

    def width(self, task: Task) -> int:
        """How many slots ``task`` holds."""
        return sum(1 for held in self.slot_to_task.values() if held is task)

    def complete(self, slot: Slot) -> Task:
        """Free ``slot``'s task, and every other slot it held."""
        task = self.slot_to_task.pop(slot)
        for other in [s for s, held in self.slot_to_task.items() if held is task]:
            del self.slot_to_task[other]
        return task

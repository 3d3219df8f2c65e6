"""Slot bookkeeping only: no threads, no processes. The dispatcher owns the loop."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from harness.hardware import arch_serves
from harness.plan import Cell


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


def make_slots(jobs: int, gpus: Iterable[tuple[int, str]]) -> tuple[Slot, ...]:
    cpu = [Slot(name=f"cpu{i}") for i in range(max(1, jobs))]
    return (*cpu, *(Slot(name=f"gpu{index}", gpu=index, arch=arch) for index, arch in gpus))


class Scheduler:
    def __init__(self, slots: Iterable[Slot]) -> None:
        self.slots = tuple(slots)
        self.pending: deque[Cell] = deque()
        self.slot_to_cell: dict[Slot, Cell] = {}

    def add(self, cells: Iterable[Cell]) -> None:
        self.pending.extend(cells)

    def assign(self) -> list[tuple[Slot, Cell]]:
        """Give each free slot the first pending cell it fits."""
        out = []
        for slot in self.slots:
            if slot in self.slot_to_cell:
                continue
            for cell in self.pending:
                if slot.fits(cell):
                    self.pending.remove(cell)
                    self.slot_to_cell[slot] = cell
                    out.append((slot, cell))
                    break
        return out

    def complete(self, slot: Slot) -> Cell:
        return self.slot_to_cell.pop(slot)

    def requeue(self, slot: Slot) -> Cell:
        """The slot was lost (its worker vanished): the cell goes back to the front."""
        cell = self.slot_to_cell.pop(slot)
        self.pending.appendleft(cell)
        return cell

    def unplaceable(self) -> list[Cell]:
        """Pending cells that no slot can ever take."""
        return [c for c in self.pending if not any(s.fits(c) for s in self.slots)]

    @property
    def idle(self) -> bool:
        return not self.pending and not self.slot_to_cell

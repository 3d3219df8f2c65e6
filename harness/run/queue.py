"""One queue of cells that several pytest processes draw from, the next cell each time one
frees up (pytest-xdist's ``load`` scheduling, across processes the harness supervises).

Before a first run nothing says how long a cell takes: cut into fixed batches, one slot ends
with the long cells while the others sit idle. Drawn from a queue, every slot stays busy until
the queue is empty. The queue is a folder of claim files, one per cell (``O_CREAT|O_EXCL``:
one process wins each), written by the in-environment plugin as it takes a cell and by the
harness when it settles cells no process can run (a broken environment, a process that could
not start). Each file holds its drawer's token, so whoever drew a cell is known after its
process is gone: what it drew and never reached goes back to the queue. The folder is on the
machine that runs the cells, and a container mounts it where the harness has it.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from harness.core.reaper import scratch_prefix
from harness.inenv.harness_queue import claim
from harness.plan.cells import Cell


class CellQueue:
    """The claims of one group of cells (one environment, hardware target and module)."""

    def __init__(self, first: str, root: Path | None = None) -> None:
        # Named like a cell's scratch folder: a killed harness's queue is reaped with them.
        self.folder = Path(tempfile.mkdtemp(prefix=scratch_prefix(f"{first}-queue"), dir=root))

    def open(self, cells: Iterable[Cell]) -> bool:
        """Whether any of ``cells`` is still to be drawn."""
        return any(not (self.folder / c.cell_id).exists() for c in cells)

    def drawer(self) -> Drawer:
        return Drawer(self.folder, secrets.token_hex(6))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class Drawer:
    """One task's hand in the queue: its processes claim cells under its token."""

    def __init__(self, folder: Path, token: str) -> None:
        self.folder, self.token = folder, token

    def args(self) -> tuple[str, ...]:
        """What the in-environment plugin is told: where the queue is, whose hand it is."""
        return (f"--harness-queue={self.folder}", f"--harness-token={self.token}")

    def take(self, cell: Cell) -> bool:
        """Claim ``cell`` for this drawer; False if some drawer had it already."""
        return claim(str(self.folder / cell.cell_id), self.token)

    def owner(self, cell: Cell) -> str | None:
        """The token that claimed ``cell``; "" while its claim is being written."""
        try:
            return (self.folder / cell.cell_id).read_text()
        except FileNotFoundError:
            return None

    def open(self, cells: Iterable[Cell]) -> list[Cell]:
        """Those of ``cells`` no drawer has claimed yet."""
        return [c for c in cells if not (self.folder / c.cell_id).exists()]

    def held(self, cells: Iterable[Cell]) -> list[Cell]:
        """Those of ``cells`` this drawer claimed."""
        return [c for c in cells if self.owner(c) == self.token]

    def take_open(self, cells: Iterable[Cell]) -> list[Cell]:
        """Claim every cell of ``cells`` still open, and return every cell this drawer holds
        (to settle them all at once: a broken environment, a process that cannot start)."""
        for cell in self.open(cells):
            self.take(cell)
        return self.held(cells)

    def release(self, cells: Iterable[Cell]) -> None:
        """Give ``cells`` back to the queue (drawn by a process that ended before it reached
        them)."""
        for cell in cells:
            (self.folder / cell.cell_id).unlink(missing_ok=True)

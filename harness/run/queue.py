"""One queue of cells several pytest processes draw from, the next cell each as it frees up
(pytest-xdist's ``load``): a folder of claim files, each holding its drawer's token."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from harness.core.reaper import scratch_prefix
from harness.inenv.harness_events import claim
from harness.plan.cells import Cell


class CellQueue:
    """The claims of one group of ``cells``, drawn by ``drawers`` tasks of one executor."""

    def __init__(self, cells: Sequence[Cell], drawers: int, root: Path | None = None) -> None:
        self.cells = tuple(cells)
        # Named like a cell's scratch folder: a killed harness's queue is reaped with them.
        self.folder = Path(tempfile.mkdtemp(prefix=scratch_prefix(cells[0].cell_id) + "queue-",
                                            dir=root))
        self.drawers = drawers
        self._lock = threading.Lock()
        self._live = drawers  # tasks still drawing

    def open(self) -> list[Cell]:
        """The cells no drawer has claimed yet."""
        return [c for c in self.cells if not (self.folder / c.cell_id).exists()]

    def leave(self) -> bool:
        """One task stopped drawing: True if it was the last."""
        with self._lock:
            self._live -= 1
            return self._live <= 0

    def drawer(self) -> Drawer:
        """A hand for one of the ``drawers`` tasks."""
        return Drawer(self, secrets.token_hex(6))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class Drawer:
    """One task's hand: its processes claim cells under its token; ``done``: those settled."""

    def __init__(self, queue: CellQueue, token: str) -> None:
        self.queue, self.folder, self.token = queue, queue.folder, token
        self.done: set[str] = set()  # settled by its processes (``run.cell``)
        self.left = False

    def args(self) -> tuple[str, ...]:
        """What the in-environment plugin is told."""
        return (f"--harness-queue={self.folder}", f"--harness-token={self.token}",
                f"--harness-drawers={self.queue.drawers}")

    def take(self, cell: Cell) -> bool:
        """Claim ``cell`` for this drawer; False if some drawer had it already."""
        return claim(str(self.folder / cell.cell_id), self.token)

    def owner(self, cell: Cell) -> str | None:
        """The token that claimed ``cell``; None while it is open."""
        try:
            return (self.folder / cell.cell_id).read_text()
        except FileNotFoundError:
            return None

    def claimed(self) -> list[Cell]:
        """The cells this drawer claimed."""
        return [c for c in self.queue.cells if self.owner(c) == self.token]

    def held(self) -> list[Cell]:
        """The cells this drawer claimed and none of its processes settled."""
        return [c for c in self.claimed() if c.cell_id not in self.done]

    def take_open(self) -> list[Cell]:
        """Claim every open cell; every cell this drawer claimed (a broken environment)."""
        for cell in self.queue.open():
            self.take(cell)
        return self.claimed()

    def give_up(self) -> list[Cell]:
        """A process ran no case: the cells to settle with its failure (those it claimed, else
        one open; the last task to stop takes every open one), then the task stops."""
        mine = self.held()
        if self.leave():
            self.take_open()
            return self.held()  # not what its processes settled already
        if not mine:
            mine = next(([c] for c in self.queue.open() if self.take(c)), [])
        return mine

    def release(self) -> None:
        """Give back what this drawer claimed and did not settle."""
        for cell in self.held():
            (self.folder / cell.cell_id).unlink(missing_ok=True)

    def leave(self) -> bool:
        """This task draws no more: True if it was the last of the queue to stop (once)."""
        if self.left:
            return False
        self.left = True
        return self.queue.leave()

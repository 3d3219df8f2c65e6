"""The local executor: this machine's CPU slots and GPUs, one thread per busy slot.

Each slot runs one cell at a time (never two cells on a GPU); a slot that frees up takes the
next pending cell it fits. Nothing polls: a finished cell frees its slot from its own thread,
and the driver waits on futures.
"""

from __future__ import annotations

import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from harness.cellrun import Cancelled, CellRun, EnvCache, ProcessGuard, run_cell
from harness.envs import Backend, get_backend
from harness.hardware import Machine
from harness.plan import Cell
from harness.scheduler import Scheduler, Slot, Task, make_slots


class LocalExecutor:
    name = "local"

    def __init__(self, machine: Machine, *, jobs: int, cache_dir: Path, cases_dir: Path
                 ) -> None:
        self.machine = machine
        self.cache_dir = cache_dir
        self.cases_dir = cases_dir
        self.slots = make_slots(jobs, [(g.index, g.arch) for g in machine.gpus])
        self.scheduler = Scheduler(self.slots)
        self.pool = ThreadPoolExecutor(max_workers=len(self.slots), thread_name_prefix="cell")
        self.envs = EnvCache()
        self.guard = ProcessGuard()
        self.node = socket.gethostname()
        self._lock = threading.Lock()
        self._futures: dict[Task, Future[CellRun]] = {}
        self._backends: dict[str, Backend] = {}

    @property
    def targets(self) -> tuple[str, ...]:
        return self.machine.targets

    @property
    def serves(self) -> frozenset[str]:
        return self.machine.serves

    def describe(self) -> dict[str, object]:
        return {"executor": self.name, "node": self.node,
                "slots": [{"name": s.name, "gpu": s.gpu, "arch": s.arch} for s in self.slots]}

    def submit(self, cell: Cell, *, run_id: str, attempt: int = 1) -> Future[CellRun]:
        task = Task(cell=cell, run_id=run_id, attempt=attempt)
        future: Future[CellRun] = Future()
        with self._lock:
            self._futures[task] = future
            self.scheduler.add([task])
            self._pump()
        return future

    def shutdown(self, *, cancel: bool = False) -> None:
        if cancel:
            self.guard.cancel()
            with self._lock:
                for task in self.scheduler.drain():
                    self._futures.pop(task).cancel()
        self.pool.shutdown(wait=True, cancel_futures=cancel)

    def _pump(self) -> None:
        """Start what fits the free slots. Called with the lock held."""
        for slot, task in self.scheduler.assign():
            self.pool.submit(self._run, slot, task)

    def _backend(self, name: str) -> Backend:
        with self._lock:
            if name not in self._backends:
                self._backends[name] = get_backend(name, self.cache_dir)
            return self._backends[name]

    def _run(self, slot: Slot, task: Task) -> None:
        outcome: CellRun | BaseException | None = None
        try:
            outcome = run_cell(task.cell, self._backend(task.cell.env.backend), slot.gpu,
                               cases_dir=self.cases_dir, envs=self.envs, guard=self.guard,
                               node=self.node, run_id=task.run_id, attempt=task.attempt)
        except Cancelled:
            outcome = None
        except BaseException as exc:  # reaches the driver through the future
            outcome = exc
        finally:
            with self._lock:
                self.scheduler.complete(slot)
                future = self._futures.pop(task)
                if not self.guard.cancelled.is_set():
                    self._pump()
        if isinstance(outcome, CellRun):
            future.set_result(outcome)
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.cancel()

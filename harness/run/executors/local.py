"""The local executor: this machine's CPU slots and GPUs, one thread per busy slot; a batch
submitted with ``draws`` runs as that many tasks drawing from one queue (``run.queue``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from harness.core.results import CellRun
from harness.envs import Backend, get_backend
from harness.plan.cells import Cell
from harness.plan.hardware import Machine
from harness.run.cell import iter_batch
from harness.run.executors import Partials
from harness.run.queue import CellQueue
from harness.run.scheduler import Scheduler, Slot, Task, make_slots
from harness.run.supervise import Cancelled, EnvCache, ProcessGuard


class LocalExecutor(Partials):
    name = "local"
    queues = True

    def __init__(self, machine: Machine, *, jobs: int, cache_dir: Path, cases_dir: Path
                 ) -> None:
        super().__init__()
        self.cache_dir, self.cases_dir = cache_dir, cases_dir
        self.slots = make_slots(jobs, [(g.index, g.arch) for g in machine.gpus])
        self.targets, self.serves, self.capacity = machine.targets, machine.serves, len(self.slots)
        self.scheduler = Scheduler(self.slots)
        self.pool = ThreadPoolExecutor(max_workers=len(self.slots), thread_name_prefix="cell")
        self.envs = EnvCache()
        self.guard = ProcessGuard()
        self.node = socket.gethostname()
        self._lock = threading.Lock()
        self._futures: dict[Task, dict[str, Future[CellRun]]] = {}
        self._failures: dict[CellQueue, BaseException] = {}  # a queue's first, till its end
        self._backends: dict[str, Backend] = {}

    def slots_for(self, cell: Cell) -> int:
        return sum(1 for slot in self.slots if slot.fits(cell))

    def describe(self) -> dict[str, object]:
        return {"executor": self.name, "node": self.node,
                "slots": [{"name": s.name, "gpu": s.gpu, "arch": s.arch} for s in self.slots]}

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1, draws: int = 1
               ) -> list[Future[CellRun]]:
        draws = min(draws, len(cells))
        queue = CellQueue(cells, draws) if draws > 1 else None
        tasks = [Task(cells=tuple(cells), run_id=run_id, attempt=attempt, queue=queue)
                 for _ in range(draws if queue else 1)]
        futures: dict[str, Future[CellRun]] = {c.cell_id: Future() for c in cells}
        with self._lock:
            for task in tasks:
                self._futures[task] = futures
            self.scheduler.pending.extend(tasks)
            self._pump()
        return list(futures.values())

    def shutdown(self, *, cancel: bool = False) -> None:
        if cancel:
            self.guard.cancel()
            with self._lock:
                for task in self.scheduler.pending:
                    futures = self._futures.pop(task)
                    if self._ended(task, None)[0]:  # no task of its queue runs
                        for future in futures.values():
                            future.cancel()
                self.scheduler.pending.clear()
        self.pool.shutdown(wait=True, cancel_futures=cancel)
        with self._lock:  # a queue whose tasks the pool dropped before they started
            for task in self._futures:
                if task.queue is not None:
                    task.queue.remove()

    def _pump(self) -> None:
        """Start what fits the free slots. Called with the lock held."""
        for slot, task in self.scheduler.assign():
            self.pool.submit(self._run, slot, task, self.scheduler.width(task))

    def _backend(self, name: str) -> Backend:
        with self._lock:
            if name not in self._backends:
                self._backends[name] = get_backend(name, self.cache_dir)
            return self._backends[name]

    def _ended(self, task: Task, failure: BaseException | None
               ) -> tuple[bool, BaseException | None]:
        """Whether ``task`` was the last of its queue to end, and then the first failure of its
        tasks, for the futures none resolved. Called with the lock held."""
        queue = task.queue
        if queue is None:
            return True, failure
        if failure is not None:
            self._failures.setdefault(queue, failure)
        if any(t.queue is queue for t in self._futures):  # (``task`` left it already)
            return False, None
        queue.remove()
        return True, self._failures.pop(queue, None)

    def _run(self, slot: Slot, task: Task, width: int = 1) -> None:
        futures = self._futures[task]
        failure: BaseException | None = None
        try:
            if task.queue is not None and not task.queue.open():
                task.queue.leave()
                return  # its sibling tasks drew every cell before it started
            for run in iter_batch(task.cells, self._backend(task.cell.env.backend), slot.gpu,
                                  cases_dir=self.cases_dir, envs=self.envs, guard=self.guard,
                                  node=self.node, run_id=task.run_id, attempt=task.attempt,
                                  workers=width, queue=task.queue):
                self._deliver(run, futures)
        except Cancelled:
            pass
        except BaseException as exc:  # reaches the driver through the futures
            failure = exc
        finally:
            with self._lock:
                self.scheduler.complete(slot)
                self._futures.pop(task)
                last, failure = self._ended(task, failure)
                if not self.guard.cancelled.is_set():
                    self._pump()
        if not last:  # its sibling tasks go on drawing
            return
        for future in futures.values():
            if future.done():
                continue
            if failure is not None:
                future.set_exception(failure)
            else:
                future.cancel()

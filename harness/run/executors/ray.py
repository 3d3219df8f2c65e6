"""The Ray executor: each batch a Ray task on a node with its kind of GPU (a resource named
after the architecture, ``{"sm_90": 1}``) or a CPU; a lost task is an ``InfraError``."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from harness.core.errors import BackendError, InfraError, UsageError
from harness.core.paths import default_cache_dir
from harness.core.reaper import reap
from harness.core.results import CellRun
from harness.envs import Backend, get_backend
from harness.plan.cells import Cell
from harness.plan.hardware import Machine, has_a_variant
from harness.run.cell import iter_batch
from harness.run.executors import Partials
from harness.run.supervise import EnvCache

ARCH = re.compile(r"sm_\d{2,3}")


def resource_for(target: str) -> str:
    """The custom resource a cell for ``target`` reserves: sm_90a cells run on sm_90 nodes."""
    return target[:-1] if target.endswith("a") and has_a_variant(target[:-1]) else target


def _loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RayExecutor(Partials):
    name = "ray"
    queues = False  # no queue shared across machines: the driver cuts fixed batches

    def __init__(self, *, address: str | None, cases_dir: Path, machine: Machine, jobs: int
                 ) -> None:
        super().__init__()
        if address is None or _loopback(address):
            # Ray rewrites a loopback address to this machine's outward IP, where nothing
            # listens for a cluster bound to 127.0.0.1; this keeps it on the loopback.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        try:
            import ray
        except ImportError:
            raise UsageError("--executor ray needs Ray: pip install 'ml-compat-harness[ray]'"
                             ) from None
        self.ray: Any = ray  # Any: its stubs reject the keyword dicts passed to init below
        self.address = address
        # Ray copies the cases folder to each node, once per content: its tasks' working folder.
        common: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "runtime_env": {"working_dir": str(cases_dir),
                                                  "excludes": ["__pycache__", "*.pyc"]}}
        try:
            if address:
                self.ray.init(address=address, ignore_reinit_error=True, **common,
                              **({"_node_ip_address": "127.0.0.1"} if _loopback(address)
                                 else {}))
            else:  # a one-machine cluster of this machine's CPUs and GPUs
                arches = Counter(g.arch for g in machine.gpus)
                self.ray.init(num_cpus=jobs, num_gpus=len(machine.gpus),
                              resources=dict(arches), _node_ip_address="127.0.0.1", **common)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise UsageError(f"--executor ray: cannot reach a Ray cluster at "
                             f"{address or 'a new local one'}: {exc}") from None
        # A generator task: each cell's run comes back as it ends, not when the batch does.
        self._remote = self.ray.remote(num_returns="streaming")(_run_on_node)
        self._lock = threading.Lock()
        self._live: dict[Any, dict[str, Future[CellRun]]] = {}  # generator -> its futures
        self._stop = threading.Event()
        self._pump = threading.Thread(target=self._collect, name="ray-results", daemon=True)
        self._pump.start()

    @property
    def resources(self) -> dict[str, float]:
        return dict(self.ray.cluster_resources())

    @property
    def targets(self) -> tuple[str, ...]:
        found = self.resources
        arches = sorted(k for k in found if ARCH.fullmatch(k))
        return (*(("cpu",) if found.get("CPU", 0) > 0 else ()), *arches)

    @property
    def serves(self) -> frozenset[str]:
        arches = [t for t in self.targets if t != "cpu"]
        return frozenset(self.targets) | {f"{a}a" for a in arches if has_a_variant(a)}

    @property
    def capacity(self) -> int:
        found = self.resources
        return max(1, int(found.get("CPU", 0)) + int(found.get("GPU", 0)))

    def describe(self) -> dict[str, object]:
        nodes = [{"node": n["NodeID"], "address": n.get("NodeManagerAddress"),
                  "resources": n.get("Resources", {})}
                 for n in self.ray.nodes() if n.get("Alive")]
        return {"executor": self.name, "address": self.address or "local", "nodes": nodes}

    def slots_for(self, cell: Cell) -> int:
        return self.capacity  # (asked only of executors with queues)

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1, draws: int = 1
               ) -> list[Future[CellRun]]:
        first = cells[0]  # (``draws`` is one: ``queues`` is False)
        if first.hardware == "cpu":
            options: dict[str, Any] = {"num_cpus": 1}
        else:  # the GPU is the slot; a CPU reservation would cap GPU cells at the node's cores
            options = {"num_cpus": 0, "num_gpus": 1,
                       "resources": {resource_for(first.hardware): 1}}
        futures: dict[str, Future[CellRun]] = {c.cell_id: Future() for c in cells}
        generator = self._remote.options(
            **options, max_retries=0, retry_exceptions=False,
            name=f"cells {first.case.label} @{first.hardware} x{len(cells)}",
        ).remote(tuple(cells), run_id, attempt)
        with self._lock:
            self._live[generator] = futures
        return list(futures.values())

    def _collect(self) -> None:
        """One thread for every running batch: waits on all their generators at once."""
        while not self._stop.is_set():
            with self._lock:
                live = list(self._live)
            if not live:
                self._stop.wait(0.2)
                continue
            try:
                ready, _ = self.ray.wait(live, num_returns=1, timeout=1.0)
            except Exception:  # shut down under us
                return
            for generator in ready:
                try:
                    run: CellRun = self.ray.get(next(generator))
                except StopIteration:
                    self._settle(generator, None)
                except Exception as exc:
                    self._settle(generator, exc)
                else:
                    self._deliver(run, self._live[generator])

    def _settle(self, generator: Any, exc: BaseException | None) -> None:
        """The batch ended: cells it did not report get the reason (a lost node)."""
        with self._lock:
            futures = self._live.pop(generator, {})
        if exc is None:
            error: BaseException = InfraError("the cell's Ray task ended without its result")
        elif isinstance(exc, self.ray.exceptions.RayTaskError):
            # The task's own code raised (a harness bug, or the harness missing on the node):
            # keep Ray's traceback, which names the node.
            error = BackendError(f"the cell's Ray task failed: {exc}")
        elif isinstance(exc, self.ray.exceptions.RayError):
            error = InfraError(f"Ray lost the cell's task: {type(exc).__name__}: "
                               f"{str(exc)[:300]}")
        else:
            error = exc
        for future in futures.values():
            if not future.done():
                future.set_exception(error)

    def shutdown(self, *, cancel: bool = False) -> None:
        with self._lock:
            live = dict(self._live)
        if cancel:
            for generator, futures in live.items():
                with contextlib.suppress(Exception):  # already finished, or its node is gone
                    self.ray.cancel(generator, force=True)
                for future in futures.values():
                    future.cancel()
        self._stop.set()
        self._pump.join(timeout=10)
        self.ray.shutdown()


# ------------------------------------------------------------------ on the node

_NODE_LOCK = threading.Lock()
_NODE_ENVS = EnvCache()  # per worker process: an environment is realized once per process
_NODE_BACKENDS: dict[str, Backend] = {}


def _run_on_node(cells: tuple[Cell, ...], run_id: str, attempt: int) -> Iterator[CellRun]:
    import ray

    cache_dir = default_cache_dir()
    name = cells[0].env.backend
    with _NODE_LOCK:
        if not _NODE_BACKENDS:  # this worker's first cell: what dead workers left, goes
            reap()
        if name not in _NODE_BACKENDS:
            _NODE_BACKENDS[name] = get_backend(name, cache_dir)
        backend = _NODE_BACKENDS[name]
    gpu_ids = ray.get_gpu_ids() if cells[0].hardware != "cpu" else []
    gpu = int(gpu_ids[0]) if gpu_ids else None
    node = ray.get_runtime_context().get_node_id()
    # The cases folder is the task's working folder (``runtime_env`` in ``RayExecutor``).
    yield from iter_batch(cells, backend, gpu, cases_dir=Path.cwd(), envs=_NODE_ENVS,
                          node=node, run_id=run_id, attempt=attempt)

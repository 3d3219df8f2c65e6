"""Watching a pytest process from outside, for a batch of cases and a suite's session alike: the
variables every cell gets, its events file read as it grows, the one loop that launches and
waits for it (killed when overdue or hung on exit), its log kept within bounds."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from harness.core import jsonio
from harness.core.errors import HarnessError, InfraError
from harness.core.paths import INENV_DIR
from harness.core.reaper import scratch_prefix
from harness.envs import Backend, Environment, LaunchRequest
from harness.plan.cells import Cell
from harness.run.classify import Ending, Kind
from harness.run.supervise import ProcessGuard

#: Set in every cell: no hub downloads, no stray bytecode; GPUs numbered by PCI bus, as the
#: probe numbers them, so that the GPU a cell is given is the GPU it gets.
CELL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONDONTWRITEBYTECODE": "1"}
SLICE = 1.0  # how often a running process's events are read: results stream out this fast
EXIT_GRACE = 30.0  # what a process whose tests all ended gets to exit on its own
LOG_LIMIT = 4 * 1024 * 1024  # a cell that prints gigabytes keeps its head and its tail
T = TypeVar("T")


def cell_variables(cell: Cell, gpu: int | None, node: str) -> dict[str, str]:
    """The cell's own variables: nothing of the harness's environment."""
    return {"PYTHONPATH": str(INENV_DIR), **CELL_ENV, **dict(cell.env.env_vars),
            # "" hides every GPU: a cpu cell must really run on the CPU.
            "CUDA_VISIBLE_DEVICES": "" if gpu is None else str(gpu),
            "HARNESS_CELL_ID": cell.cell_id, "HARNESS_HARDWARE": cell.hardware,
            "HARNESS_NODE": node}


@contextlib.contextmanager
def scratch_folder(cell_id: str) -> Iterator[Path]:
    """A process's own folder (events, log), named so that a killed harness's is reaped."""
    scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(cell_id)))
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Watch:
    """What a running pytest process has said so far (its events file, read incrementally)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self.offset = 0
        self.events: list[dict[str, Any]] = []
        self.finished: set[str] = set()
        self.started: set[str] = set()
        # Tests started and not ended, with their start (one per xdist worker in a suite)
        self.running: dict[str, float] = {}
        self.last_activity = time.time()
        self.hardware: dict[str, Any] = {}
        self.ended = False  # pytest said it is done (a suite's plugin); only teardown is left
        self.exitstatus: int | None = None  # pytest's own, with ``ended``
        self.drained = False  # it found no case left to claim in its queue (``run.queue``)
        self.missing: list[str] = []  # with ``drained``: node ids asked for, not collected

    def read(self) -> list[dict[str, Any]]:
        """The events written since the last read."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits for later
        self.offset += len(complete)
        new = _decoded(complete)
        for event in new:
            self.events.append(event)
            kind, nodeid = event.get("event"), event.get("nodeid", "")
            if kind == "session":
                self.hardware = event.get("hardware", {})
            elif kind == "start":
                self.started.add(nodeid)
                self.last_activity = float(event.get("time", time.time()))
                self.running[nodeid] = self.last_activity
            elif kind == "finish":
                self.finished.add(nodeid)
                self.running.pop(nodeid, None)
                self.last_activity = float(event.get("time", time.time()))
            elif kind == "drained":
                self.drained = True
                self.missing = list(event.get("missing") or [])
            elif kind == "ended":
                self.ended = True
                self.exitstatus = event.get("exitstatus")
        return new

    @property
    def current(self) -> str | None:
        """The test running longest: the one a timeout or a crash of the process is put on."""
        return min(self.running, key=self.running.__getitem__) if self.running else None

    def overdue(self) -> bool:
        """Each case has the timeout from its own start (the first, from the process's)."""
        return time.time() > self.last_activity + self.timeout

    def since_start(self, nodeid: str) -> float:
        """How long the running test ``nodeid`` has run."""
        return time.time() - self.running[nodeid]

    def events_of(self, nodeid: str) -> tuple[dict[str, Any], ...]:
        return tuple(e for e in self.events
                     if e.get("nodeid") == nodeid or e.get("event") == "session")


def _decoded(lines: bytes) -> list[dict[str, Any]]:
    """The events of whole lines: decoded at once, else line by line (no JSON object: left out)."""
    try:
        values = jsonio.loads(b"[" + lines.strip().replace(b"\n", b",") + b"]")
    except ValueError:
        values = []
        for line in lines.splitlines():
            try:
                values.append(json.loads(line))
            except ValueError:
                continue
    return [v for v in values if isinstance(v, dict)]


#: Why the harness killed the process: it passed its timeout, every result was in and it
#: hung on the way out, or the caller asked (``stop``).
Killed = Literal["timeout", "settled", "stopped"]


@dataclass(frozen=True)
class Ended:
    code: int  # the exit status; -9 when it would not say
    killed: Killed | None = None  # None: it ended on its own
    failed: Ending | None = None  # the machine could not start it, or failed while it ran
    oom: bool = False  # the backend saw its memory limit kill the process
    memory: str | None = None  # the environment's memory limit
    timeout: float = 0.0  # the timeout it ran under, seconds

    def ending(self, kind: Kind, **fields: Any) -> Ending:
        """This end, for ``classify``, as a case's or a session's ``kind`` of end."""
        return Ending(kind=kind, returncode=self.code, timed_out=self.killed == "timeout",
                      oom=self.oom, memory=self.memory, timeout=self.timeout, **fields)


def watch_process(backend: Backend, env: Environment, request: LaunchRequest, watch: Watch,
                  guard: ProcessGuard, *, tick: Callable[[], Iterator[T]],
                  settled: Callable[[], bool], stop: Callable[[], bool] = lambda: False
                  ) -> Generator[T, None, Ended]:
    """Launch ``request``, yielding what ``tick`` yields each ``SLICE``; kill it once
    ``settled()`` and done or quiet, once overdue, or on ``stop()``. Raises ``Cancelled``."""
    try:
        process = backend.launch(env, request)
    except (OSError, HarnessError) as exc:  # no test ran: the driver runs them again
        return Ended(-9, failed=Ending(kind="cannot_start", reason=str(exc)))
    watch.last_activity = time.time()  # the first test's timeout runs from the launch
    code: int | None = None
    killed: Killed | None = None
    try:
        with guard.watching(process):
            while code is None:
                try:
                    code = process.wait(SLICE)
                except InfraError as exc:
                    process.kill()
                    return Ended(-9, failed=Ending(kind="machine_lost", reason=str(exc)))
                if code is not None:
                    break
                yield from tick()
                if stop():
                    killed = "stopped"
                elif settled() and (watch.ended
                                    or time.time() > watch.last_activity + EXIT_GRACE):
                    killed = "settled"
                elif watch.overdue():
                    killed = "timeout"
                if killed is not None:
                    process.kill()
                    code = process.wait(60)
    except GeneratorExit:  # whoever listened stopped (an environment's check broke it)
        process.kill()
        with contextlib.suppress(InfraError):  # a machine that stopped answering: gone
            process.wait(60)
        raise
    guard.check()
    return Ended(-9 if code is None else code, killed,
                 oom=bool(getattr(process, "oom_killed", False)), memory=env.spec.memory,
                 timeout=watch.timeout)


def read_log(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size <= LOG_LIMIT:
                return fh.read()
            head = fh.read(LOG_LIMIT // 2)
            fh.seek(size - LOG_LIMIT // 2)
            return head + f"\n[... {size - LOG_LIMIT} bytes cut ...]\n".encode() + fh.read()
    except OSError:
        return b""


def clipped(log: bytes) -> bytes:
    """``log`` within ``LOG_LIMIT`` as ``read_log`` keeps a file: its head and its tail (a
    suite's session joins the logs of its processes)."""
    if len(log) <= LOG_LIMIT:
        return log
    cut = f"\n[... {len(log) - LOG_LIMIT} bytes cut ...]\n".encode()
    return log[:LOG_LIMIT // 2] + cut + log[len(log) - LOG_LIMIT // 2:]


def tail(log: Path, lines: int = 4) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:])[-600:]

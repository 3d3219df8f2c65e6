"""One cell, start to finish, on the machine that runs it: realize, launch, wait, classify.

``run_cell`` blocks, and returns everything the driver records (result, log, events, the
environment's fingerprint) instead of leaving it on a disk the driver may not share. The
in-env plugin reports PASS/REPRODUCED/FAIL/SKIP/ERROR; what only the parent can see (a hang, a
process that died) becomes TIMEOUT or CRASH here; a machine that failed (a container that never
started, a Docker engine that stopped answering) is an ERROR marked ``infra``, for the driver
to retry, never the case's CRASH.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.cases import INENV_DIR, pytest_args
from harness.envs import Backend, Environment, LaunchRequest, Process
from harness.errors import HarnessError, InfraError
from harness.plan import Cell
from harness.results import CellResult, Outcome

#: Set in every cell: no hub downloads at run time, no stray bytecode in the cases folder.
#: CUDA_DEVICE_ORDER: CUDA's own default numbers the fastest GPU first; the probe (nvidia-smi,
#: NVML) numbers them by PCI bus. On a mixed host, the GPU a cell is given must be the GPU it
#: gets.
CELL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONDONTWRITEBYTECODE": "1"}
LOG_LIMIT = 4 * 1024 * 1024  # a cell that prints gigabytes keeps its head and its tail


@dataclass(frozen=True, kw_only=True)
class CellRun:
    """What running a cell produced, to be recorded by whoever asked for it."""

    result: CellResult
    log: bytes = b""
    events: tuple[dict[str, Any], ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict)
    env_built: bool | None = None  # None: the environment could not be realized


class Cancelled(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The executor was shut down while the cell ran; its process group is gone."""


class ProcessGuard:
    """The processes cells have running, so that Ctrl-C or SIGTERM kills every one of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[Any] = set()
        self.cancelled = threading.Event()

    def add(self, process: Process) -> None:
        with self._lock:
            self._live.add(process)
        if self.cancelled.is_set():  # started while shutting down
            process.kill()

    def discard(self, process: Process) -> None:
        with self._lock:
            self._live.discard(process)

    def cancel(self) -> None:
        self.cancelled.set()
        with self._lock:
            live = list(self._live)
        for process in live:
            process.kill()


@dataclass(frozen=True)
class Realized:
    env: Environment | None
    error: str = ""  # why there is no environment
    log: str = ""  # a backend bug's traceback
    built: bool = False  # built by this call


class EnvCache:
    """Environments realized in this process, once each, however many cells ask at once.

    A failure is remembered too: one broken environment is one build attempt per process,
    not one per cell."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, Realized] = {}

    def realize(self, cell: Cell, backend: Backend) -> Realized:
        key = f"{cell.env.backend}:{cell.env.key}:{cell.env.name}"
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._done:
                return replace(self._done[key], built=False)
            try:
                env = backend.realize(cell.env)
                outcome = Realized(env, built=env.built)
            except HarnessError as exc:
                outcome = Realized(None, str(exc))
            except Exception as exc:  # a backend bug: reported on the cells, traceback kept
                outcome = Realized(None, "backend bug while realizing the environment: "
                                   f"{type(exc).__name__}: {exc}", traceback.format_exc())
            self._done[key] = outcome
            return outcome


def cell_variables(cell: Cell, gpu: int | None, node: str) -> dict[str, str]:
    """The cell's own variables: nothing of the harness's environment."""
    return {"PYTHONPATH": str(INENV_DIR), **CELL_ENV, **dict(cell.env.env_vars),
            # "" hides every GPU: a cpu cell must really run on the CPU.
            "CUDA_VISIBLE_DEVICES": "" if gpu is None else str(gpu),
            "HARNESS_CELL_ID": cell.cell_id, "HARNESS_HARDWARE": cell.hardware,
            "HARNESS_NODE": node}


def run_cell(cell: Cell, backend: Backend, gpu: int | None, *, cases_dir: Path,
             envs: EnvCache | None = None, guard: ProcessGuard | None = None,
             node: str | None = None, run_id: str = "", attempt: int = 1,
             scratch_root: Path | None = None) -> CellRun:
    """Run one cell to its end and return what happened. Raises only ``Cancelled``."""
    node = node or socket.gethostname()
    place: dict[str, Any] = {"run_id": run_id, "attempt": attempt, "node": node, "gpu": gpu}
    realized = (envs or EnvCache()).realize(cell, backend)
    env = realized.env
    if env is None:
        return CellRun(result=static_result(cell, Outcome.ERROR, realized.error, **place),
                       log=realized.log.encode(), env_built=None)
    scratch = Path(tempfile.mkdtemp(prefix=f"harness-cell-{cell.cell_id}-", dir=scratch_root))
    try:
        result = _launch_and_wait(cell, env, backend, gpu, cases_dir, scratch, guard, place)
        events = tuple(_read_events(scratch / "events.jsonl"))
        log = _read_log(scratch / "cell.log")
    except Cancelled:
        raise
    except Exception as exc:  # a harness bug: the cell is ERROR and the traceback is its log
        result = static_result(cell, Outcome.ERROR, f"harness bug running the cell: "
                               f"{type(exc).__name__}: {exc}", fingerprint=env.summary, **place)
        events, log = (), traceback.format_exc().encode()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return CellRun(result=result, log=log, events=events, fingerprint=env.fingerprint,
                   env_built=realized.built)


def _launch_and_wait(cell: Cell, env: Environment, backend: Backend, gpu: int | None,
                     cases_dir: Path, scratch: Path, guard: ProcessGuard | None,
                     place: dict[str, Any]) -> CellResult:
    events = scratch / "events.jsonl"
    request = LaunchRequest(
        argv=("-m", "pytest", "-q", "-x", "-rN", *pytest_args(cases_dir),
              f"--harness-events={events}", cell.case.nodeid),
        env=cell_variables(cell, gpu, place["node"]), cwd=cases_dir, log=scratch / "cell.log",
        work_dir=scratch, cases_dir=cases_dir, gpu=gpu, timeout=env.spec.timeout)
    started = time.monotonic()
    try:
        process = backend.launch(env, request)
    except (OSError, HarnessError) as exc:
        # The case never ran: the machine could not start it (retried by the driver).
        return static_result(cell, Outcome.ERROR, f"cannot start: {exc}",
                             fingerprint=env.summary, infra=True, **place)
    if guard is not None:
        guard.add(process)
    try:
        code = process.wait(env.spec.timeout)
        timed_out = code is None
        if timed_out:
            process.kill()
            code = process.wait(60)
    except InfraError as exc:
        process.kill()
        return static_result(cell, Outcome.ERROR, str(exc), fingerprint=env.summary,
                             infra=True, **place)
    finally:
        if guard is not None:
            guard.discard(process)
    if guard is not None and guard.cancelled.is_set():
        raise Cancelled
    return classify(cell, env, _read_events(events), code if code is not None else -9,
                    timed_out=timed_out, duration=time.monotonic() - started,
                    log_tail=_tail(scratch / "cell.log"), place=place)


def classify(cell: Cell, env: Environment, events: list[dict[str, Any]], returncode: int, *,
             timed_out: bool, duration: float, log_tail: str, place: dict[str, Any]
             ) -> CellResult:
    """The one place where what happened to the process becomes an outcome."""
    session = next((e for e in events if e.get("event") == "session"), {})
    started = any(e.get("event") == "start" for e in events)
    finish = next((e for e in events if e.get("event") == "finish"), None)
    if finish is not None:
        outcome, reason = Outcome(finish["outcome"]), finish.get("reason", "")
        duration = finish.get("duration", duration)
    elif timed_out:
        outcome = Outcome.TIMEOUT
        reason = (f"no result after {env.spec.timeout:g} s; process group killed"
                  + ("" if started else " (still starting: import or collection hung)"))
    elif returncode < 0:
        outcome, reason = Outcome.CRASH, f"process killed by {_signal_name(-returncode)}"
    elif started:
        outcome = Outcome.CRASH
        reason = f"process exited with code {returncode} in the middle of the case"
    else:
        outcome = Outcome.ERROR
        reason = f"pytest exited {returncode} before the case started: " + log_tail
    return _result(cell, outcome=outcome, reason=reason,
                   signature=(finish or {}).get("signature"), fingerprint=env.summary,
                   hardware=session.get("hardware", {}), details=(finish or {}).get("details", {}),
                   caveat=(finish or {}).get("caveat", ""), duration=round(duration, 3), **place)


def static_result(cell: Cell, outcome: Outcome, reason: str, *,
                  fingerprint: dict[str, Any] | None = None, run_id: str = "",
                  attempt: int = 1, node: str = "", gpu: int | None = None,
                  infra: bool = False) -> CellResult:
    """A result decided without the case running: NOT_RUN, or ERROR for a broken environment
    or a machine that failed."""
    return _result(cell, outcome=outcome, reason=reason, fingerprint=fingerprint or {},
                   run_id=run_id, attempt=attempt, node=node, gpu=gpu, infra=infra)


def _result(cell: Cell, **fields: Any) -> CellResult:
    return CellResult(
        cell_id=cell.cell_id, environment=cell.env.name, values=dict(cell.env.values),
        env_key=cell.env.key, backend=cell.env.backend, case_id=cell.case.case_id,
        variant=cell.case.variant, nodeid=cell.case.nodeid, hardware_target=cell.hardware,
        finished_at=time.time(), **fields)


def _read_events(path: Path) -> list[dict[str, Any]]:
    events = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue  # torn by the crash we are classifying
    except OSError:
        pass
    return events


def _read_log(path: Path) -> bytes:
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(log: Path, lines: int = 4) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:])[-600:]

"""Run one cell: start pytest in its environment, then turn what happened into a result.

The in-env plugin reports PASS/REPRODUCED/FAIL/SKIP/ERROR; what only the parent can see
(a hang, a process that died) becomes TIMEOUT or CRASH here.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.cases import pytest_args, pytest_env
from harness.envs import Backend, Environment, LaunchRequest, Process
from harness.plan import Cell
from harness.results import CellResult, Outcome
from harness.store import RunStore

#: Set in every cell: no hub downloads at run time, no stray bytecode in the cases folder.
#: CUDA_DEVICE_ORDER: CUDA's own default numbers the fastest GPU first; the probe (nvidia-smi,
#: NVML) numbers them by PCI bus. On a mixed host, the GPU a cell is given must be the GPU it
#: gets.
CELL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


@dataclass
class Running:
    cell: Cell
    env: Environment
    process: Process
    started: float
    deadline: float
    gpu: int | None


def start_cell(cell: Cell, env: Environment, backend: Backend, store: RunStore,
               cases_dir: Path, gpu: int | None) -> Running:
    events = store.events_path(cell.cell_id)
    events.unlink(missing_ok=True)  # a resumed cell starts from a clean slate
    variables = {**pytest_env(), **CELL_ENV, **dict(env.spec.env_vars),
                 # "" hides every GPU: a cpu cell must really run on the CPU.
                 "CUDA_VISIBLE_DEVICES": "" if gpu is None else str(gpu),
                 "HARNESS_CELL_ID": cell.cell_id, "HARNESS_HARDWARE": cell.hardware}
    request = LaunchRequest(
        argv=("-m", "pytest", "-q", "-x", "-rN", *pytest_args(cases_dir),
              f"--harness-events={events}", cell.case.nodeid),
        env=variables, cwd=cases_dir, log=store.log_path(cell.cell_id), run_dir=store.run_dir,
        cases_dir=cases_dir, gpu=gpu, timeout=env.spec.timeout,
    )
    now = time.monotonic()
    process = backend.launch(env, request)
    return Running(cell=cell, env=env, process=process, started=now,
                   deadline=now + env.spec.timeout, gpu=gpu)


def finish_cell(running: Running, store: RunStore, returncode: int, *, timed_out: bool
                ) -> CellResult:
    events = _read_events(store.events_path(running.cell.cell_id))
    session = next((e for e in events if e.get("event") == "session"), {})
    started = any(e.get("event") == "start" for e in events)
    finish = next((e for e in events if e.get("event") == "finish"), None)
    duration = round(time.monotonic() - running.started, 3)
    log = store.log_path(running.cell.cell_id)
    if finish is not None:
        outcome, reason = Outcome(finish["outcome"]), finish.get("reason", "")
        duration = finish.get("duration", duration)
    elif timed_out:
        outcome = Outcome.TIMEOUT
        reason = (f"no result after {running.env.spec.timeout:g} s; process group killed"
                  + ("" if started else " (still starting: import or collection hung)"))
    elif returncode < 0:
        outcome, reason = Outcome.CRASH, f"process killed by {_signal_name(-returncode)}"
    elif started:
        outcome = Outcome.CRASH
        reason = f"process exited with code {returncode} in the middle of the case"
    else:
        outcome = Outcome.ERROR
        reason = f"pytest exited {returncode} before the case started: " + _tail(log)
    return CellResult(
        run_id=store.run_id, cell_id=running.cell.cell_id, environment=running.env.spec.name,
        values=dict(running.env.spec.values), env_key=running.env.spec.key,
        backend=running.env.spec.backend, case_id=running.cell.case.case_id,
        variant=running.cell.case.variant, nodeid=running.cell.case.nodeid,
        hardware_target=running.cell.hardware, outcome=outcome, reason=reason,
        signature=(finish or {}).get("signature"), fingerprint=running.env.summary,
        hardware=session.get("hardware", {}), details=(finish or {}).get("details", {}),
        duration=duration, log=str(log), finished_at=time.time(),
    )


def static_result(cell: Cell, store: RunStore, outcome: Outcome, reason: str,
                  fingerprint: dict[str, Any] | None = None) -> CellResult:
    """A result decided without running the cell: NOT_RUN, or ERROR for a broken environment."""
    return CellResult(
        run_id=store.run_id, cell_id=cell.cell_id, environment=cell.env.name,
        values=dict(cell.env.values), env_key=cell.env.key, backend=cell.env.backend,
        case_id=cell.case.case_id, variant=cell.case.variant, nodeid=cell.case.nodeid,
        hardware_target=cell.hardware, outcome=outcome, reason=reason,
        fingerprint=fingerprint or {}, finished_at=time.time(),
    )


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

"""The loop: build environments in the background, hand cells to free slots, record results.

Environments are realized one at a time on a builder thread while cells of the ready ones
already run; a bad cell or a broken environment never stops the run.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.envs import Backend, Environment
from harness.errors import HarnessError
from harness.execute import Running, finish_cell, start_cell, static_result
from harness.plan import Cell
from harness.results import CellResult, Outcome
from harness.scheduler import Scheduler, Slot
from harness.spec import EnvSpec
from harness.store import RunStore

POLL_SECONDS = 0.05


@dataclass
class DispatchStats:
    envs_built: int = 0
    envs_reused: int = 0
    envs_failed: int = 0
    first_case_at: float | None = None
    results: list[CellResult] = field(default_factory=list)


@dataclass(frozen=True)
class _Ready:
    spec: EnvSpec
    env: Environment | None
    error: str | None


def _builder(specs: Sequence[EnvSpec], backends: dict[str, Backend],
             out: queue.Queue[_Ready], stop: threading.Event) -> None:
    for spec in specs:
        if stop.is_set():
            return
        try:
            out.put(_Ready(spec, backends[spec.backend].realize(spec), None))
        except HarnessError as exc:
            out.put(_Ready(spec, None, str(exc)))
        except Exception as exc:  # a backend bug must not hang the run: report it on the cells
            out.put(_Ready(spec, None, f"{type(exc).__name__}: {exc}"))


def dispatch(cells: Sequence[Cell], backends: dict[str, Backend], slots: Sequence[Slot],
             store: RunStore, cases_dir: Path, on_result: Callable[[CellResult], None],
             on_note: Callable[[str], None] = lambda _: None) -> DispatchStats:
    stats = DispatchStats()
    by_env: dict[str, list[Cell]] = {}
    specs: dict[str, EnvSpec] = {}
    for cell in cells:
        by_env.setdefault(cell.env.name, []).append(cell)
        specs.setdefault(cell.env.name, cell.env)
    ready: queue.Queue[_Ready] = queue.Queue()
    stop = threading.Event()
    builder = threading.Thread(target=_builder, args=(list(specs.values()), backends, ready,
                                                      stop), daemon=True, name="env-builder")
    builder.start()
    scheduler = Scheduler(slots)
    envs: dict[str, Environment] = {}
    running: dict[Slot, Running] = {}
    remaining_envs = len(specs)

    def record(result: CellResult) -> None:
        store.append(result)
        stats.results.append(result)
        on_result(result)

    try:
        while remaining_envs or not scheduler.idle:
            while True:
                try:
                    item = ready.get_nowait()
                except queue.Empty:
                    break
                remaining_envs -= 1
                if item.env is None:
                    stats.envs_failed += 1
                    on_note(f"environment {item.spec.name}: ERROR {item.error}")
                    for cell in by_env[item.spec.name]:
                        record(static_result(cell, store, Outcome.ERROR, item.error or ""))
                    continue
                stats.envs_built += item.env.built
                stats.envs_reused += not item.env.built
                on_note(f"environment {item.spec.name}: "
                        + ("built" if item.env.built else "up to date, nothing rebuilt"))
                envs[item.spec.name] = item.env
                store.write_json(f"envs/{item.spec.key}.json", item.env.fingerprint)
                scheduler.add(by_env[item.spec.name])
                for cell in scheduler.unplaceable():  # defensive: never spin on a lost cell
                    scheduler.pending.remove(cell)
                    record(static_result(cell, store, Outcome.NOT_RUN,
                                         f"no slot for {cell.hardware} on this machine"))
            for slot, cell in scheduler.assign():
                env = envs[cell.env.name]
                try:
                    running[slot] = start_cell(cell, env, backends[cell.env.backend], store,
                                               cases_dir, slot.gpu)
                except (OSError, HarnessError) as exc:
                    scheduler.complete(slot)
                    record(static_result(cell, store, Outcome.ERROR, f"cannot start: {exc}",
                                         env.summary))
                    continue
                if stats.first_case_at is None:
                    stats.first_case_at = time.monotonic()
            for slot, run in list(running.items()):
                code = run.process.poll()
                timed_out = code is None and time.monotonic() > run.deadline
                if timed_out:
                    run.process.kill()
                    code = run.process.wait()
                if code is None:
                    continue
                del running[slot]
                scheduler.complete(slot)
                record(finish_cell(run, store, code, timed_out=timed_out))
            time.sleep(POLL_SECONDS)
    finally:
        # Ctrl-C or a harness bug: kill every child group; finished results are on disk.
        stop.set()
        for run in running.values():
            run.process.kill()
        for run in running.values():
            run.process.wait()
    return stats

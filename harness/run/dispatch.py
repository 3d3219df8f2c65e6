"""The driver loop: cells go in batches (one pytest process each, or a queue several draw
from), longest expected first; each result is recorded as it arrives, a lost machine retried."""

from __future__ import annotations

import math
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, wait
from dataclasses import dataclass, field, replace
from typing import Protocol

from harness.core.defaults import RETRIES
from harness.core.errors import InfraError
from harness.core.results import CellResult, CellRun
from harness.plan.cells import Cell
from harness.run.cell import static_result
from harness.run.classify import NOT_LOST, Ending, classify, flaky, next_try
from harness.run.executors import Executor

PARTIALS_EVERY = 0.5  # seconds: how soon a suite's test is on disk after it ends


class Recorder(Protocol):
    """Where results go as they end (a ``RunStore``)."""

    @property
    def run_id(self) -> str: ...

    def record(self, run: CellRun) -> CellResult: ...

    def sync(self) -> None: ...


@dataclass
class DispatchStats:
    envs_built: set[str] = field(default_factory=set)
    envs_reused: set[str] = field(default_factory=set)
    envs_failed: set[str] = field(default_factory=set)
    first_result_at: float | None = None

    def environments_line(self) -> str:
        failed = f", {len(self.envs_failed)} failed" if self.envs_failed else ""
        reused = self.envs_reused - self.envs_built
        nothing = " (nothing to build)" if not self.envs_built and not self.envs_failed else ""
        return (f"environments: {len(self.envs_built)} built, {len(reused)} reused{failed}"
                + nothing)


#: A batch and how many processes draw from it (1: one process runs it all).
Unit = tuple[list[Cell], int]


def order_batches(batches: Sequence[Unit], expected: Mapping[str, float]) -> list[Unit]:
    """Longest expected first (per drawing process); batches with an untimed cell first."""
    def known(unit: Unit) -> bool:
        return all(c.cell_id in expected for c in unit[0])

    unknown = [u for u in batches if not known(u)]
    timed = sorted((u for u in batches if known(u)),
                   key=lambda u: -sum(expected[c.cell_id] for c in u[0]) / u[1])
    return unknown + timed


def make_queues(cells: Sequence[Cell], capacity: int, *,
                expected: Mapping[str, float] | None = None,
                fits: Callable[[Cell], int] | None = None) -> list[Unit]:
    """Cells that share an environment, hardware target and module (``isolate`` ones alone),
    each group with how many processes draw from it: widened while slots would stay idle, or
    by its share of the work; at most a cell each and ``fits`` (its slots)."""
    by_key: dict[tuple[str, str, str], list[Cell]] = {}
    alone = [[c] for c in cells if c.case.isolate]
    for cell in cells:
        if not cell.case.isolate:
            by_key.setdefault((cell.env.name, cell.hardware, cell.case.path), []).append(cell)
    groups = list(by_key.values())

    def most(group: list[Cell]) -> int:
        return min(len(group), fits(group[0]) if fits is not None else capacity)

    units: list[Unit] = [(g, 1) for g in groups]
    if expected and all(c.cell_id in expected for c in cells):
        share = sum(expected[c.cell_id] for c in cells) / max(1, capacity)
        units = []
        for group in groups:
            work = sum(expected[c.cell_id] for c in group)
            draws = math.ceil(work / share - 1e-6) if share > 0 else 1
            units.append((sorted(group, key=lambda c: -expected[c.cell_id]),
                          max(1, min(draws, most(group)))))
    while sum(d for _, d in units) + len(alone) < capacity:
        wider = [i for i, (group, draws) in enumerate(units) if draws < most(group)]
        if not wider:
            break
        widest = max(wider, key=lambda i: len(units[i][0]) / units[i][1])
        units[widest] = (units[widest][0], units[widest][1] + 1)
    return units + [(a, 1) for a in alone]


def make_batches(cells: Sequence[Cell], capacity: int, *, batch: bool = True,
                 expected: Mapping[str, float] | None = None) -> list[list[Cell]]:
    """Cells that can share a pytest process, for executors without queues: each of
    ``make_queues``'s groups cut in as many parts as processes would draw from it."""
    if not batch:
        return [[c] for c in cells]
    expected = expected or {}
    order = {c.cell_id: i for i, c in enumerate(cells)}
    batches = []
    for group, parts in make_queues(cells, capacity, expected=expected):
        # The longest cell onto the least loaded part (an untimed one counts as a second).
        bins: list[list[Cell]] = [[] for _ in range(parts)]
        loads = [0.0] * parts
        for cell in sorted(group, key=lambda c: -expected.get(c.cell_id, 1.0)):
            least = loads.index(min(loads))
            bins[least].append(cell)
            loads[least] += expected.get(cell.cell_id, 1.0)
        batches += [sorted(b, key=lambda c: order[c.cell_id]) for b in bins if b]
    return batches


def dispatch(cells: Sequence[Cell], executor: Executor, store: Recorder, *,
             on_result: Callable[[CellResult], None],
             on_note: Callable[[str], None] = lambda _: None,
             expected: Mapping[str, float] | None = None,
             retries: int = RETRIES, batch: bool = True) -> DispatchStats:
    """Run ``cells`` and record each result; ``on_result`` hears each last attempt and suite
    test, ``on_note`` what is said of environments and retries."""
    stats = DispatchStats()
    futures: dict[Future[CellRun], tuple[Cell, int]] = {}
    expected = expected or {}
    if batch and executor.queues:
        units = make_queues(cells, executor.capacity, expected=expected,
                            fits=executor.slots_for)
    else:
        units = [(b, 1) for b in make_batches(cells, executor.capacity, batch=batch,
                                              expected=expected)]
    for group, draws in order_batches(units, expected):
        submitted = executor.submit(group, run_id=store.run_id, draws=draws)
        for cell, future in zip(group, submitted, strict=True):
            futures[future] = (cell, 1)
    # Cells of each environment not yet settled: its "up to date" note waits for the last.
    unsettled = Counter(cell.env.name for cell in cells)
    lost: Counter[str] = Counter()  # machine losses per cell: retried up to `retries`
    tries: Counter[str] = Counter()  # the case's own failed tries: up to cell.retries
    first_failure: dict[str, CellResult] = {}
    try:
        while futures:
            done, _ = wait(futures, timeout=PARTIALS_EVERY, return_when=FIRST_COMPLETED)
            # First: a session's tests arrive before its future resolves, and are recorded
            # before it (--resume looks for the session's line).
            for partial in executor.partials():
                tested = store.record(partial)
                _count_env(stats, partial, on_note)  # the first test of a session it built
                on_result(tested)
            for future in done:
                cell, attempt = futures.pop(future)
                run = _collect(future, cell, store.run_id, attempt)
                if cell.cell_id in first_failure and run.result.outcome.passed:
                    run = replace(run, result=flaky(run.result, first_failure[cell.cell_id]))
                result = store.record(run)
                _count_env(stats, run, on_note)
                again = None
                step = next_try(result, machine_losses=lost[cell.cell_id],
                                case_tries=tries[cell.cell_id], retries=retries,
                                case_retries=cell.retries)
                if step == "machine":
                    lost[cell.cell_id] += 1
                    said = "" if result.reason.startswith(NOT_LOST) else "machine lost, "
                    again = f"{said}retrying (attempt {attempt + 1}): {result.reason}"
                elif step == "case":
                    tries[cell.cell_id] += 1
                    first_failure.setdefault(cell.cell_id, result)
                    again = (f"{result.outcome}, trying again ({tries[cell.cell_id]} of "
                             f"{cell.retries} retries): {result.reason}")
                if again is not None:
                    on_note(f"{cell.case.label} @{cell.hardware} ({cell.env.name}): {again}")
                    (resubmitted,) = executor.submit([cell], run_id=store.run_id,
                                                     attempt=attempt + 1)
                    futures[resubmitted] = (cell, attempt + 1)
                    continue
                if stats.first_result_at is None:
                    stats.first_result_at = time.monotonic()
                on_result(result)
                # Every cell of the environment settled: "up to date" unless built or failed.
                name = cell.env.name
                unsettled[name] -= 1
                if not unsettled[name] and name in (
                        stats.envs_reused - stats.envs_built - stats.envs_failed):
                    on_note(f"environment {name}: up to date, nothing rebuilt")
    except BaseException:  # Ctrl-C, SIGTERM or a harness bug: kill what runs, keep what ended
        executor.shutdown(cancel=True)
        raise
    finally:
        store.sync()  # what was recorded, on the disk (it is fsynced in batches)
    return stats


def _collect(future: Future[CellRun], cell: Cell, run_id: str, attempt: int) -> CellRun:
    """The future's CellRun, or an ERROR for a lost machine or a bug in the executor."""
    try:
        return future.result()
    except CancelledError:
        ending, log = Ending(kind="cancelled"), b""
    except InfraError as exc:
        ending, log = Ending(kind="executor_lost", reason=str(exc)), b""
    except Exception as exc:
        ending = Ending(kind="executor_failed", reason=f"{type(exc).__name__}: {exc}")
        log = "".join(traceback.format_exception(exc)).encode()
    return CellRun(result=static_result(cell, classify(ending), run_id=run_id, attempt=attempt),
                   log=log)


def _count_env(stats: DispatchStats, run: CellRun, on_note: Callable[[str], None]) -> None:
    """Count what ``run`` says of its environment; say once that it was built or failed."""
    name = run.result.environment
    if run.result.infra:
        return
    if run.env_built is None:
        if name not in stats.envs_built | stats.envs_failed:
            on_note(f"environment {name}: ERROR {run.result.reason}")
        stats.envs_failed.add(name)
    elif run.env_built:
        if name not in stats.envs_built:
            on_note(f"environment {name}: built")
        stats.envs_built.add(name)
    else:
        stats.envs_reused.add(name)

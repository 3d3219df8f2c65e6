"""Cells, start to finish, on the machine that runs them: realize, launch, wait, classify;
what the driver records is returned, not left on a disk it may not share."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.core.matrix import memory_bytes
from harness.core.results import CellResult, CellRun, Outcome
from harness.envs import Backend, Environment, LaunchRequest
from harness.plan.cases import pytest_args
from harness.plan.cells import Cell
from harness.run.classify import Decision, Ending, classify
from harness.run.queue import CellQueue, Drawer
from harness.run.suite import iter_session
from harness.run.supervise import EnvCache, ProcessGuard, Realized, settled
from harness.run.watch import Watch, cell_variables, read_log, scratch_folder, tail, watch_process


def run_cell(cell: Cell, backend: Backend, gpu: int | None, *, cases_dir: Path,
             workers: int = 1) -> CellRun:
    """Run one cell to its end (a suite's session with its tests as ``children``)."""
    runs = list(iter_batch([cell], backend, gpu, cases_dir=cases_dir, workers=workers))
    (own,) = (r for r in runs if r.result.cell_id == cell.cell_id)
    return replace(own, children=tuple(r for r in runs if r is not own))


def iter_batch(cells: Sequence[Cell], backend: Backend, gpu: int | None, *, cases_dir: Path,
               envs: EnvCache | None = None, guard: ProcessGuard | None = None,
               node: str | None = None, run_id: str = "", attempt: int = 1, workers: int = 1,
               queue: CellQueue | None = None) -> Iterator[CellRun]:
    """Run cells of one environment and target in as few pytest processes as they allow,
    yielding each run as it ends (a suite's tests before its session); ``queue``: drawn with
    other calls. Raises only ``Cancelled``."""
    drawer = queue.drawer() if queue is not None else None
    guard = guard or ProcessGuard()
    place: dict[str, Any] = {"run_id": run_id, "attempt": attempt,
                             "node": node or socket.gethostname(), "gpu": gpu}
    try:
        realized = (envs or EnvCache()).realize(cells[0], backend)
        suite = cells[0].case.suite is not None  # a test suite's session: always alone
        if suite:  # its tests are recorded as they end: check first
            realized = settled(realized)
        if realized.env is None:
            yield from _not_realized(_ours(cells, drawer), realized, place)
        elif suite:
            yield from _built_once(iter_session(
                cells[0], realized.env, backend, gpu, guard=guard, place=place,
                workers=workers), realized.built)
        else:
            batch = _Batch(realized.env, backend, gpu, cases_dir, guard, place,
                           realized.checking, drawer)
            yield from _once_checked(_processes(cells, batch), realized, cells, batch)
    finally:
        if drawer is not None:
            drawer.leave()


@dataclass(frozen=True)
class _Batch:
    """What every pytest process of one ``iter_batch`` call shares."""

    env: Environment
    backend: Backend
    gpu: int | None
    cases_dir: Path
    guard: ProcessGuard
    place: dict[str, Any]
    checking: Future[Environment] | None  # the new environment's check beside the cells
    drawer: Drawer | None

    @property
    def broken(self) -> bool:
        """The check beside the cells has found their environment broken."""
        checking = self.checking
        return checking is not None and checking.done() and checking.exception() is not None

    def finished(self, cell: Cell, finish: dict[str, Any], watch: Watch) -> CellResult:
        decision = classify(Ending(kind="finished", reported=Outcome(finish["outcome"]),
                                   reason=finish.get("reason", ""), memory=self.env.spec.memory))
        return static_result(cell, decision, signature=finish.get("signature"),
                             fingerprint=self.env.summary, hardware=watch.hardware,
                             details=finish.get("details", {}), caveat=finish.get("caveat", ""),
                             duration=round(float(finish.get("duration", 0.0)), 3),
                             finished_at=float(finish.get("time") or time.time()), **self.place)

    def ended(self, cell: Cell, hardware: dict[str, Any], ending: Ending) -> CellResult:
        """``cell``'s result for its process's end."""
        return static_result(cell, classify(ending), fingerprint=self.env.summary,
                             hardware=hardware, **self.place)


def _built_once(runs: Iterable[CellRun], built: bool) -> Iterator[CellRun]:
    """``runs``, the first of which says whether the environment was built for them."""
    for run in runs:
        yield run if run.env_built is built else replace(run, env_built=built)
        built = False


def _ours(cells: Sequence[Cell], drawer: Drawer | None) -> list[Cell]:
    """The cells this call settles when none can run: all, or those no other drawer claimed."""
    return list(cells) if drawer is None else drawer.take_open()


def _processes(cells: Sequence[Cell], batch: _Batch) -> Generator[CellRun | None, None, None]:
    """Pytest processes over ``cells``, each from the next cell not yet run; with a check
    beside them, None each second after it ended well, and a stop once it broke."""
    drawer = batch.drawer
    done = drawer.done if drawer is not None else set()
    remaining = list(cells) if drawer is None else drawer.queue.open()
    while remaining and not batch.broken:
        with scratch_folder(remaining[0].cell_id) as scratch:
            for run in _one_process(remaining, batch, scratch):
                if run is not None:
                    done.add(run.result.cell_id)
                yield run
        if drawer is None:
            remaining = [c for c in remaining if c.cell_id not in done]
        elif drawer.left:  # it gave up (a process ran no case): the others draw the rest
            break
        else:
            drawer.release()
            remaining = drawer.queue.open()


def _once_checked(runs: Generator[CellRun | None, None, None], realized: Realized,
                  cells: Sequence[Cell], batch: _Batch) -> Iterator[CellRun]:
    """``runs``, held while a new environment's check runs, then fingerprinted; if the check
    breaks it, every cell of the batch is its ERROR instead."""
    held: list[CellRun] = []
    with contextlib.closing(runs):
        for run in runs:
            if run is not None:
                held.append(run)
            if realized.checking is not None and not realized.checking.done():
                continue
            realized = settled(realized)
            if realized.env is None:
                break
            if held:
                yield from _checked(held, realized)
                held, realized = [], replace(realized, built=False)  # reported once
    if realized.checking is not None and not realized.checking.done():
        batch.guard.check()  # stopped while the check ran: what was held is no result
    realized = settled(realized)
    if realized.env is None:
        yield from _not_realized(_ours(cells, batch.drawer), realized, batch.place)
        return
    yield from _checked(held, realized)


def _checked(runs: list[CellRun], realized: Realized) -> Iterator[CellRun]:
    env = realized.env
    assert env is not None
    yield from _built_once((replace(run, result=run.result.replace(fingerprint=env.summary),
                                    fingerprint=env.fingerprint) for run in runs),
                           realized.built)


def _not_realized(cells: Sequence[Cell], realized: Realized,
                  place: dict[str, Any]) -> Iterator[CellRun]:
    for cell in cells:
        yield CellRun(result=static_result(cell, classify(Ending(
            kind="not_realized", reason=realized.error)), **place),
                      log=realized.log.encode(), env_built=None)


def _one_process(cells: Sequence[Cell], batch: _Batch, scratch: Path
                 ) -> Iterator[CellRun | None]:
    """One pytest process over ``cells``, yielding each cell it settles (all of them if it
    reached none); with a ``drawer``, the cells it claims (``Drawer.give_up``)."""
    env, drawer, cases_dir = batch.env, batch.drawer, batch.cases_dir
    by_node = {c.case.nodeid: c for c in cells}
    events_path, log_path = scratch / "events.jsonl", scratch / "cell.log"
    # A batch shares the process's log; from a queue, named after the first cell it settles.
    log_name: str | None = (cells[0].cell_id if len(cells) == 1 and drawer is None
                            else f"{cells[0].cell_id}-batch" if drawer is None else None)
    variables = cell_variables(cells[0], batch.gpu, batch.place["node"])
    variables["HARNESS_CELL_IDS"] = json.dumps({n: c.cell_id for n, c in by_node.items()})
    request = LaunchRequest(
        argv=("-m", "pytest", "-q", "-rN", *pytest_args(cases_dir),
              f"--harness-events={events_path}", *(drawer.args() if drawer else ()), *by_node),
        env=variables, cwd=cases_dir, log=log_path, work_dir=scratch, cases_dir=cases_dir,
        gpu=batch.gpu, timeout=env.spec.timeout,
        memory=memory_bytes(env.spec.memory) if env.spec.memory else None,
        queue=drawer.folder if drawer else None)
    watch = Watch(events_path, env.spec.timeout)

    def run_of(result: CellResult, events: tuple[dict[str, Any], ...] = ()) -> CellRun:
        nonlocal log_name
        log_name = log_name or f"{result.cell_id}-batch"
        return CellRun(result=result, log=read_log(log_path), log_name=log_name,
                       events=events, fingerprint=env.fingerprint)

    def finished() -> Iterator[CellRun]:
        for event in watch.read():
            nodeid = event.get("nodeid")
            if event.get("event") == "finish" and nodeid in by_node:
                yield run_of(batch.finished(by_node[nodeid], event, watch),
                             watch.events_of(nodeid))

    def tick() -> Iterator[CellRun | None]:
        yield from finished()
        if batch.checking is not None and batch.checking.done() and not batch.broken:
            yield None  # what waited for the check goes now

    ended = yield from watch_process(
        batch.backend, env, request, watch, batch.guard, tick=tick, stop=lambda: batch.broken,
        settled=lambda: watch.drained if drawer else all(n in watch.finished for n in by_node))
    if ended.killed == "stopped":  # the check found the environment broken: no result counts
        return
    failed = ended.failed
    if failed is not None:  # the cells it did not settle (none ran if it never started)
        lost = (cells if drawer is None else
                drawer.give_up() if failed.kind == "cannot_start" else drawer.held())
        for cell in lost:
            if cell.case.nodeid not in watch.finished:
                yield run_of(batch.ended(cell, {}, failed))
        return
    yield from finished()  # what it wrote between the last look and its end
    current = watch.current
    if current is not None and current in by_node:
        # The case that was running when its process ended: it hung, or it took it down.
        yield run_of(batch.ended(by_node[current], watch.hardware, ended.ending("died")
                                 ).replace(duration=round(watch.since_start(current), 3)),
                     watch.events_of(current))
    unreached: list[Cell] = []
    if current is None and not watch.started and not watch.drained:
        # It reached no case at all: do not start another process for them.
        unreached = list(cells if drawer is None else drawer.give_up())
    if drawer is not None and watch.missing:  # asked for, not collected: none can run it
        unreached += [c for c in cells if c.case.nodeid in watch.missing and drawer.take(c)]
    for cell in unreached:
        yield run_of(batch.ended(cell, watch.hardware,
                                 ended.ending("never_started", reason=tail(log_path))))


def static_result(cell: Cell, decision: Decision, **fields: Any) -> CellResult:
    """The cell's result as ``classify`` decided it; ``fields``: the rest of ``CellResult``."""
    fields.setdefault("finished_at", time.time())
    fields.setdefault("run_id", "")
    fields["fingerprint"] = fields.get("fingerprint") or {}
    return CellResult(
        cell_id=cell.cell_id, environment=cell.env.name, values=dict(cell.env.values),
        env_key=cell.env.key, backend=cell.env.backend, case_id=cell.case.case_id,
        variant=cell.case.variant, nodeid=cell.case.nodeid, hardware_target=cell.hardware,
        outcome=decision.outcome, reason=decision.reason, infra=decision.infra, **fields)

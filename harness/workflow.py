"""``harness run`` as a chain of steps. Each takes the previous state and returns the next one,
or an int: the exit code that ends the run there (nox's workflow shape)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

from harness import __version__
from harness.core import atomic
from harness.core.bulk import no_cycle_collection
from harness.core.paths import default_cache_dir
from harness.core.reaper import Registry
from harness.core.redact import Redactor
from harness.core.results import CellResult, CellRun, counted
from harness.plan.cells import Plan
from harness.plan.hardware import probe_machine

# What a run is asked and its state live with the steps before any cell runs (``planning``,
# which ``harness plan`` imports alone); a run's callers find them here too.
from harness.planning import (
    RunOptions,
    RunState,
    Step,
    load_spec,
    plan_cells,
    probe_targets,
    shard_durations,
)
from harness.records import expect, snapshot
from harness.records.baseline import load_baseline
from harness.records.compare import bumped, new_releases, pinned_releases
from harness.records.runs import newest_first, previous_run
from harness.records.snapshot import rows_of
from harness.records.store import RunStore, is_done
from harness.report.build import diff_runs, write_report
from harness.report.ci import publish, status_badge
from harness.run.cell import static_result
from harness.run.classify import Ending, classify
from harness.run.dispatch import dispatch
from harness.run.executors import Executor
from harness.run.executors.local import LocalExecutor
from harness.run.executors.ray import RayExecutor
from harness.run.progress import RunProgress

__all__ = ["RunOptions", "RunState", "default_cache_dir", "execute", "load_spec", "plan_cells",
           "probe_targets", "shard_durations"]


def open_executor(state: RunState) -> RunState:
    """Where cells will run; planning asks it which hardware there is."""
    assert state.spec is not None
    opts = state.options
    machine = probe_machine(opts.gpus)
    cases_dir = state.spec.cases_dir.resolve()
    executor: Executor
    if opts.executor == "ray":
        executor = RayExecutor(address=opts.address, cases_dir=cases_dir, machine=machine,
                               jobs=opts.jobs)
    else:
        # What a killed run on this machine left running (cells, builds) goes first.
        reaped = Registry(opts.cache_dir).reap()
        if reaped:
            print(f"reaped {sum(len(r['killed']) for r in reaped)} processes of "
                  f"{len(reaped)} cells or builds left by a killed run")
        executor = LocalExecutor(machine, jobs=opts.jobs, cache_dir=opts.cache_dir,
                                 cases_dir=cases_dir)
    return replace(state, executor=executor, targets=executor.targets)


def open_store(state: RunState) -> RunState | int:
    assert state.plan is not None and state.executor is not None and state.spec is not None
    opts = state.options
    # The matrix's own `env:` values count too (an API key given to a case).
    redactor = Redactor.from_environment(*(e.env_vars for e in state.spec.environments))
    if opts.resume:
        store = RunStore.open(opts.reports_dir, opts.resume, redactor)
        results = store.results()
        done = {r.cell_id for r in results if is_done(r)}
        # A suite's session cut short: the tests it recorded stay, the rest run.
        tests: dict[str, list[CellResult]] = {}
        for r in results:
            if r.parent and r.cell_id in done:
                tests.setdefault(r.parent, []).append(r)
        plan = Plan(cells=tuple(replace(c, resumed=tuple(tests.get(c.cell_id, ())))
                                if c.case.suite is not None else c
                                for c in state.plan.cells if c.cell_id not in done))
        partial = sum(len(c.resumed) for c in plan.cells)
        print(f"resuming {store.run_id}: {len(done) - partial} cells done, {len(plan.cells)} "
              "to run" + (f" (suites cut short: {partial} recorded tests kept, the rest run)"
                        if partial else ""))
        return replace(state, store=store, plan=plan)
    matrix_text = Path(opts.matrix).read_bytes()
    cases = {c.label: c.metadata() for c in state.cases}
    cases.update((c.case.label, c.case.metadata()) for c in state.plan.cells if c.case.suite)
    store = RunStore.create(opts.reports_dir, {
        "harness": __version__, "matrix": str(opts.matrix),
        "matrix_sha256": hashlib.sha256(matrix_text).hexdigest()[:16],
        "executor": state.executor.describe(), "targets": list(state.executor.targets),
        "filters": {"only": opts.only, "keyword": opts.keyword, "hardware": opts.hardware},
        "environments": {e.name: e.to_dict() for e in state.plan.environments},
        "planned": [c.to_dict() for c in state.plan.cells],
        "shard": opts.shard,
        # What the matrix's release queries resolved to, and the --set values: what makes
        # this plan the one it is, beside the matrix file.
        "releases": [r.to_dict() for r in state.spec.resolutions],
        "set": dict(state.spec.sets),
        "expect": [rule.to_dict() for rule in state.spec.expect] if state.spec else [],
        # A shard knows the whole plan: a merge shows the cells of a shard that never came.
        "full_plan": [c.to_dict() for c in (state.full_plan or state.plan).cells]
        if opts.shard else None,
    }, run_id=opts.run_id, cases=cases, redactor=redactor)
    print(f"run {store.run_id}: {len(state.plan.cells)} cells in "
          f"{len(state.plan.environments)} environments -> {store.run_dir}")
    return replace(state, store=store)


def run_cells(state: RunState) -> RunState:
    assert state.plan is not None and state.store is not None and state.executor is not None
    present = state.executor.serves
    runnable = [c for c in state.plan.cells if c.hardware in present]
    absent = [c for c in state.plan.cells if c.hardware not in present]
    there = ", ".join(t for t in state.executor.targets if t != "cpu") or "none"
    with RunProgress(len(state.plan.cells), live=state.options.live,
                     verbose=state.options.verbose) as progress:
        for cell in absent:
            result = state.store.record(CellRun(result=static_result(
                cell, classify(Ending(kind="hardware_absent", hardware=cell.hardware,
                                      present=there)),
                run_id=state.store.run_id)))
            progress.advance(result)
        stats = dispatch(runnable, state.executor, state.store, on_result=progress.advance,
                         on_note=progress.note, expected=expected_durations(state),
                         retries=state.options.retries, batch=state.options.batch)
    if runnable:
        # Says outright when a re-run needed no build (uv venvs and docker images alike).
        print(stats.environments_line())
    return replace(state, stats=stats)


def expected_durations(state: RunState) -> dict[str, float]:
    """Each cell's duration in the newest earlier run that has it (for longest-first)."""
    wanted = {c.cell_id for c in state.plan.cells} if state.plan else set()
    out: dict[str, float] = {}
    for run_dir in islice(newest_first(state.options.reports_dir), 5):
        for cell_id, duration in snapshot.load(run_dir).durations_by_cell().items():
            if cell_id in wanted and cell_id not in out:
                out[cell_id] = duration
    return out


def report(state: RunState) -> RunState:
    assert state.store is not None
    if state.options.report:
        opts = state.options
        baseline = load_baseline(Path(opts.baseline), opts.reports_dir) if opts.baseline else None
        paths = publish_report(state.store, opts.reports_dir, baseline=baseline)
        print(f"report: {paths['index.html']} (also compat.md, .csv, .json, junit.xml, "
              "heatmap.png)")
        if opts.sets:  # a bump: what it changed is the point of running it
            summary = paths["summary"].read_text(encoding="utf-8")
            _, found, changes = summary.partition("## Changes since")
            print(f"what changed since{changes.rstrip()}" if found else
                  "what changed: no earlier run of this slice (or a full run) to compare with")
        publish_ci(state.store, opts.reports_dir)
    else:  # no report: the snapshot the next run's "what changed" and history read
        snapshot.load(state.store.run_dir)
    return state


def publish_report(store: RunStore, reports_dir: Path, *, baseline: Any = None,
                   previous: RunStore | None = None,
                   results: Sequence[CellResult] | None = None) -> dict[str, Path]:
    """The run's report, into its own folder (``<run>/report``), compared with ``previous``
    (default: the run before it of the same slice); ``reports/latest`` then points at it if
    the run covers the whole matrix (a ``-k`` or ``--shard`` run never moves it).
    ``results``: the record's, if the caller holds them (``write_report``)."""
    if previous is None:
        before = previous_run(reports_dir, store.run_dir)
        previous = RunStore(before) if before else None
    out = store.run_dir / "report"
    with no_cycle_collection():  # the run's driver is long-lived; its report is a batch
        paths = write_report([store], out, baseline=baseline, previous=previous,
                             results=results)
    meta = store.meta
    filters = meta.get("filters") or {}
    if not meta.get("shard") and not any(filters.values()):
        point_latest(reports_dir, out)
    return paths


def point_latest(reports_dir: Path, target: Path) -> None:
    """``reports/latest`` -> the newest full report (a relative link, replaced atomically)."""
    link = reports_dir / "latest"
    reports_dir.mkdir(parents=True, exist_ok=True)
    atomic.point_link(link, os.path.relpath(target.resolve(), reports_dir.resolve()))


def publish_ci(store: RunStore, reports_dir: Path,
               results: Sequence[CellResult] | None = None) -> None:
    """Under CI: the step summary and the new-failure annotations, against the run before.
    ``results``: the record's, if the caller holds them (a merge: not read a second time)."""
    import os

    if not (os.environ.get("GITHUB_STEP_SUMMARY") or os.environ.get("GITHUB_ACTIONS")):
        return
    before, results, changes = _against_previous(store, reports_dir, results)
    releases = new_releases(store.meta, before.meta) if before else []
    publish(store.run_id, results, changes, before.run_id if before else None, releases,
            pinned_releases(store.meta.get("environments") or {}))


def write_status(store: RunStore, reports_dir: Path, path: Path) -> dict[str, Any]:
    """The badge JSON for ``store`` (``report.ci.status_badge``), against the run before."""
    before, results, changes = _against_previous(store, reports_dir)
    badge = status_badge(counted(results), changes, before.run_id if before else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(badge) + "\n")
    return badge


def _against_previous(store: RunStore, reports_dir: Path,
                      results: Sequence[CellResult] | None = None
                      ) -> tuple[RunStore | None, list[CellResult], list[dict[str, Any]]]:
    """The run before ``store`` (``records.runs.previous_run``), ``store``'s results, and
    what changed since (a bump's cells against the cells it replaced)."""
    found = previous_run(reports_dir, store.run_dir)
    before = RunStore(found) if found else None
    mine = list(results) if results is not None else store.results()
    changes = (diff_runs(snapshot.load(before.run_dir).rows(), rows_of(mine),
                         bumped([store.meta])) if before else [])
    return before, mine, changes


def exit_code(state: RunState) -> int:
    """By ``--fail-on``: a cell failing that was not expected to (the default), any change
    from what was expected, or any failure at all."""
    assert state.store is not None
    return expect.judged_exit([state.store], state.options.reports_dir,
                              state.options.fail_on, state.options.baseline)


RUN_STEPS: Sequence[Step] = (load_spec, open_executor, plan_cells, open_store, run_cells,
                             report)


def execute(state: RunState, steps: Sequence[Step] = RUN_STEPS) -> int:
    try:
        for step in steps:
            result = step(state)
            if isinstance(result, int):
                return result
            state = result
        return exit_code(state)
    finally:
        if state.executor is not None:
            state.executor.shutdown()

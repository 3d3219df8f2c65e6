"""``harness run`` as a chain of steps. Each takes the previous state and returns the next one,
or an int: the exit code that ends the run there (nox's workflow shape)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from itertools import islice
from pathlib import Path

from harness import __version__
from harness.core import reaper
from harness.core.redact import Redactor
from harness.core.results import CellResult, CellRun
from harness.core.words import plural
from harness.plan.cells import Plan
from harness.plan.hardware import probe_machine

# The steps before any cell runs live in ``planning`` (``harness plan`` imports it alone).
from harness.planning import RunOptions, RunState, Step, load_spec, plan_cells
from harness.publish import publish_ci, publish_report
from harness.records import expect, table
from harness.records.expect import load_baseline
from harness.records.store import RunStore, is_done, newest_first
from harness.run.cell import static_result
from harness.run.classify import Ending, classify
from harness.run.dispatch import dispatch
from harness.run.executors import Executor
from harness.run.executors.local import LocalExecutor
from harness.run.executors.ray import RayExecutor
from harness.run.progress import RunProgress

__all__ = ["RunOptions", "RunState", "execute", "load_spec", "plan_cells"]


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
        reaped = reaper.reap()
        if reaped:
            print(f"reaped {sum(map(len, reaped.values()))} processes of "
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
        # The run's own plan, not this command line's: a resume without its -k runs its slice.
        planned = {c["cell_id"] for c in store.planned()}
        plan = Plan(cells=tuple(replace(c, resumed=tuple(tests.get(c.cell_id, ())))
                                if c.case.suite is not None else c for c in state.plan.cells
                                if c.cell_id in planned and c.cell_id not in done))
        partial = sum(len(c.resumed) for c in plan.cells)
        gone = len(planned - done - {c.cell_id for c in plan.cells})
        print(f"resuming {store.run_id}: {len(done) - partial} cells done, {len(plan.cells)} "
              "to run" + (f" (suites cut short: {partial} recorded tests kept, the rest run)"
                        if partial else "")
              + (f"; {gone} of its cells are not in this plan (matrix or filters changed)"
                 if gone else ""))
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
        # What the run was for: history, --baseline latest and "what changed" follow nightlies.
        "kind": opts.kind or ("bump" if state.spec.sets else "nightly"),
        "expect": [rule.to_dict() for rule in state.spec.expect],
        # A shard knows the whole plan: a merge shows the cells of a shard that never came.
        "full_plan": [c.to_dict() for c in (state.full_plan or state.plan).cells]
        if opts.shard else None,
    }, run_id=opts.run_id, cases=cases, redactor=redactor)
    print(f"run {store.run_id}: {plural(len(state.plan.cells), 'cell')} in "
          f"{plural(len(state.plan.environments), 'environment')} -> {store.run_dir}")
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
        for cell_id, duration in table.read(run_dir, table.DURATIONS).durations_by_cell().items():
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
    # The run's table: what the next run's "what changed", history and baselines read.
    table.read(state.store.run_dir, table.DURATIONS)
    return state


RUN_STEPS: Sequence[Step] = (load_spec, open_executor, plan_cells, open_store, run_cells,
                             report)


def execute(state: RunState, steps: Sequence[Step] = RUN_STEPS) -> int:
    try:
        for step in steps:
            result = step(state)
            if isinstance(result, int):
                return result
            state = result
        assert state.store is not None  # the exit code by --fail-on
        return expect.judged_exit([state.store], state.options.reports_dir,
                                  state.options.fail_on, state.options.baseline)
    finally:
        if state.executor is not None:
            state.executor.shutdown()

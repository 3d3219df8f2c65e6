"""``harness run`` as a chain of steps. Each takes the previous state and returns the next one,
or an int: the exit code that ends the run there (nox's workflow shape)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness import __version__
from harness.cases import CaseVariant, collect_cases
from harness.dispatch import DispatchStats, dispatch
from harness.envs import get_backend
from harness.execute import static_result
from harness.hardware import Machine, probe_machine
from harness.plan import Plan, filter_plan, make_plan
from harness.progress import RunProgress
from harness.report import write_report
from harness.results import Outcome
from harness.scheduler import make_slots
from harness.sources import find_links_folders, offline_from_environment, with_find_links
from harness.spec import MatrixSpec, load_matrix
from harness.store import RunStore


def default_cache_dir() -> Path:
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ml-compat-harness"


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    matrix: Path = Path("matrix.yaml")
    reports_dir: Path = Path("reports")
    cache_dir: Path = field(default_factory=default_cache_dir)
    only: tuple[str, ...] = ()
    keyword: str | None = None
    hardware: tuple[str, ...] = ()
    gpus: str | None = None
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    resume: str | None = None
    report: bool = True
    live: bool | None = None
    find_links: tuple[Path, ...] = ()
    offline: bool = False


@dataclass(frozen=True, kw_only=True)
class RunState:
    options: RunOptions
    spec: MatrixSpec | None = None
    cases: tuple[CaseVariant, ...] = ()
    machine: Machine | None = None
    plan: Plan | None = None
    store: RunStore | None = None
    stats: DispatchStats | None = None


Step = Callable[[RunState], "RunState | int"]


def load_spec(state: RunState) -> RunState:
    folders = find_links_folders(state.options.find_links)
    spec = with_find_links(load_matrix(state.options.matrix), folders,
                           offline=offline_from_environment(state.options.offline))
    return replace(state, spec=spec, cases=collect_cases(spec.cases_dir.resolve()))


def plan_cells(state: RunState) -> RunState:
    assert state.spec is not None
    machine = probe_machine(state.options.gpus)
    plan = make_plan(state.spec, state.cases, machine.targets)
    plan = filter_plan(plan, only=state.options.only, keyword=state.options.keyword,
                       hardware=state.options.hardware)
    return replace(state, machine=machine, plan=plan)


def open_store(state: RunState) -> RunState | int:
    assert state.plan is not None and state.machine is not None and state.spec is not None
    opts = state.options
    if opts.resume:
        store = RunStore.open(opts.reports_dir, opts.resume)
        done = store.done_cells()
        plan = Plan(cells=tuple(c for c in state.plan.cells if c.cell_id not in done))
        print(f"resuming {store.run_id}: {len(done)} cells done, {len(plan.cells)} to run")
        return replace(state, store=store, plan=plan)
    matrix_text = Path(opts.matrix).read_bytes()
    store = RunStore.create(opts.reports_dir, {
        "harness": __version__, "matrix": str(opts.matrix),
        "matrix_sha256": hashlib.sha256(matrix_text).hexdigest()[:16],
        "machine": {"host": state.machine.host, "gpus": [g.__dict__ for g in state.machine.gpus],
                    "nvcc": state.machine.nvcc},
        "filters": {"only": opts.only, "keyword": opts.keyword, "hardware": opts.hardware},
        "planned": [c.to_dict() for c in state.plan.cells],
    })
    print(f"run {store.run_id}: {len(state.plan.cells)} cells in "
          f"{len(state.plan.environments)} environments -> {store.run_dir}")
    return replace(state, store=store)


def run_cells(state: RunState) -> RunState:
    assert state.plan is not None and state.store is not None and state.machine is not None
    assert state.spec is not None
    present = state.machine.serves
    runnable = [c for c in state.plan.cells if c.hardware in present]
    absent = [c for c in state.plan.cells if c.hardware not in present]
    backends = {name: get_backend(name, state.options.cache_dir)
                for name in {c.env.backend for c in runnable}}
    slots = make_slots(state.options.jobs, [(g.index, g.arch) for g in state.machine.gpus])
    with RunProgress(len(state.plan.cells), live=state.options.live) as progress:
        gpus = ", ".join(g.arch for g in state.machine.gpus) or "none"
        for cell in absent:
            result = static_result(cell, state.store, Outcome.NOT_RUN,
                                   f"needs {cell.hardware}; this machine has GPUs: {gpus}")
            state.store.append(result)
            progress.advance(result)
        stats = dispatch(runnable, backends, slots, state.store,
                         state.spec.cases_dir.resolve(), progress.advance, progress.note)
    if runnable:
        # Says outright when a re-run needed no build (uv venvs and docker images alike).
        print(f"environments: {stats.envs_built} built, {stats.envs_reused} reused"
              + ("" if stats.envs_built else " (nothing to build)"))
    return replace(state, stats=stats)


def report(state: RunState) -> RunState:
    assert state.store is not None
    if state.options.report:
        paths = write_report(state.store, state.options.reports_dir)
        print(f"table: {paths['md']} (also .csv, .json, .html)")
    return state


def exit_code(state: RunState) -> int:
    assert state.store is not None
    results = state.store.results()
    bad = [r for r in results if not r.outcome.ok]
    return 1 if bad else 0


RUN_STEPS: Sequence[Step] = (load_spec, plan_cells, open_store, run_cells, report)


def execute(state: RunState, steps: Sequence[Step] = RUN_STEPS) -> int:
    for step in steps:
        result = step(state)
        if isinstance(result, int):
            return result
        state = result
    return exit_code(state)

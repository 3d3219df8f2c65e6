"""What a run is asked to do, and the steps before any cell runs (matrix read, cases collected,
cells planned): ``harness plan``, ``cases`` and ``doctor`` import this, not ``harness.workflow``."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.defaults import DEFAULT_FAIL_ON, RETRIES
from harness.core.errors import UsageError
from harness.core.matrix import MatrixSpec
from harness.core.paths import default_cache_dir
from harness.matrix.load import load_matrix
from harness.matrix.overrides import in_use, parse_sets
from harness.matrix.releases import Releases
from harness.matrix.sources import with_find_links
from harness.plan.cases import CaseVariant, collect_cases
from harness.plan.cells import Plan, case_counter, filter_plan, make_plan
from harness.plan.hardware import probe_machine
from harness.plan.shard import select_shard
from harness.records import table
from harness.records.store import RunStore

if TYPE_CHECKING:  # the run layer: what a run's later steps put in the state
    from harness.run.dispatch import DispatchStats
    from harness.run.executors import Executor


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    matrix: Path = Path("matrix.yaml")
    reports_dir: Path = Path("reports")
    cache_dir: Path = field(default_factory=default_cache_dir)
    only: tuple[str, ...] = ()
    keyword: str | None = None
    hardware: tuple[str, ...] = ()
    gpus: str | None = None
    max_cells: int | None = None  # None: HARNESS_MAX_CELLS, else core.defaults.MAX_CELLS
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)
    resume: str | None = None
    run_id: str | None = None
    report: bool = True
    live: bool | None = None
    verbose: bool = False  # every NOT_RUN cell on a line of its own
    find_links: tuple[Path, ...] = ()
    offline: bool = False
    registry: str | None = None  # Docker images pulled from and pushed to (HOST[:PORT]/NAME)
    refresh: bool = False
    executor: str = "local"
    shard: str | None = None  # "I/N": only this shard of the plan
    durations_from: str | None = None  # a run whose durations balance the shards
    address: str | None = None  # a Ray cluster: "auto" or HOST:PORT; none starts one here
    retries: int = RETRIES
    batch: bool = True  # cells of one module share a pytest process (--isolate-cells: never)
    fail_on: str = DEFAULT_FAIL_ON  # what makes the exit code 1 (core.defaults.FAIL_ON)
    baseline: str | None = None  # a baseline file or a run: what each cell is expected to be
    sets: tuple[tuple[str, str], ...] = ()  # --set KEY=VALUE: axis values replaced or added
    kind: str | None = None  # the record's kind (records.store.KINDS); None: by ``sets``


def run_options(args: argparse.Namespace) -> RunOptions:
    """``RunOptions`` from a command's arguments (plan, run, bisect): each argument named as a
    field is that field; what the command lacks, the default."""
    given = {f.name: vars(args)[f.name] for f in fields(RunOptions)
             if vars(args).get(f.name) is not None}
    return RunOptions(**{**given, "only": tuple(args.only), "hardware": tuple(args.hardware),
                         "find_links": tuple(args.find_links), "sets": parse_sets(args.sets)},
                      reports_dir=args.reports, report=not vars(args).get("no_report"),
                      batch=not vars(args).get("isolate_cells"))


@dataclass(frozen=True, kw_only=True)
class RunState:
    options: RunOptions
    spec: MatrixSpec | None = None
    cases: tuple[CaseVariant, ...] = ()
    executor: Executor | None = None
    targets: tuple[str, ...] = ()  # what `auto` hardware becomes (from the executor)
    plan: Plan | None = None
    full_plan: Plan | None = None  # before sharding: what a merge of the shards must cover
    store: RunStore | None = None
    stats: DispatchStats | None = None


Step = Callable[[RunState], "RunState | int"]


def load_spec(state: RunState) -> RunState:
    options = state.options
    releases = Releases.for_run(options.matrix, options.find_links, options.offline,
                                "refresh" if options.refresh else "lock")
    offline = releases.mode == "offline"
    matrix = load_matrix(options.matrix, max_cells=options.max_cells, releases=releases,
                         overrides=options.sets, count_cases=case_counter())
    changes = releases.changes()  # against the lock as it was
    if not offline and not options.sets:  # a bump or a probe leaves the lock as it is
        releases.save()
    for line in [*changes,
                 *(line for r in matrix.resolutions for line in r.lines()
                   if r.source != "lock" or r.left_out)]:
        print(f"harness: {line}", file=sys.stderr)
    spec = with_find_links(matrix, releases.find_links, offline=offline,
                           registry=options.registry)
    if options.refresh:
        now = time.time()
        spec = replace(spec, environments=tuple(replace(e, refresh_before=now)
                                                for e in spec.environments))
    if not spec.needs_cases:  # only test suites: they collect in their environments
        return replace(state, spec=spec, cases=())
    cases_dir = spec.cases_dir.resolve()
    if not (cases_dir / "pytest.ini").is_file():
        raise spec.cases_error(f"{spec.cases_dir}: not a cases folder (no pytest.ini there)")
    try:
        cases = collect_cases(cases_dir)
    except UsageError as exc:  # the cases do not collect: point at where they come from
        raise spec.cases_error(str(exc)) from None
    return replace(state, spec=spec, cases=cases)


def probe_targets(state: RunState) -> RunState:
    """For ``harness plan``: this machine's hardware, without starting an executor."""
    return replace(state, targets=probe_machine(state.options.gpus).targets)


def plan_cells(state: RunState, *, notes: bool = True) -> RunState:
    """The run's cells; ``notes``: say where each --set landed (once a run, not per look-up)."""
    assert state.spec is not None
    plan = make_plan(state.spec, state.cases, state.targets)
    plan = filter_plan(plan, only=state.options.only, keyword=state.options.keyword,
                       hardware=state.options.hardware)
    origins = {c.env.origin for c in plan.cells}  # where each --set landed, of what is in use
    for note in filter(None, (in_use(n, origins) for n in state.spec.set_notes if notes)):
        print(f"harness: {note}", file=sys.stderr)
    if state.options.sets:  # a release the index does not have: said before anything builds
        releases = Releases.for_run(state.options.matrix, state.options.find_links,
                                    state.options.offline, "lock")
        envs = {c.env.name: c.env for c in plan.cells}.values()
        releases.check_sets(state.options.sets, envs, state.spec.distributions)
    full = plan
    if state.options.shard:
        plan = select_shard(plan, state.options.shard, shard_durations(state.options))
    return replace(state, plan=plan, full_plan=full)


def shard_durations(options: RunOptions) -> dict[str, float]:
    """Durations from ``--durations-from`` (the same run on every machine: the same shards)."""
    if not options.durations_from:
        return {}
    run_dir = RunStore.open(options.reports_dir, options.durations_from).run_dir
    return table.read(run_dir, table.DURATIONS).durations_by_cell()

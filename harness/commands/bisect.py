"""``harness bisect``: the first release of an axis where one cell's outcome changes, or with
``--between``, which package changes between two runs flip it (delta debugging). Each probe or
trial is an ordinary run with ``--set``; an answer resting on one that could not be built is
inconclusive: said, recorded (reports/bisects/), and the exit status is 1."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from fnmatch import fnmatchcase
from itertools import islice, pairwise
from typing import Any

from packaging.version import Version

from harness.core.errors import UsageError
from harness.core.matrix import requirement_name
from harness.core.releases import ReleaseQuery, parsed, release_order
from harness.core.results import CellResult, Outcome
from harness.core.words import plural
from harness.matrix.releases import Releases
from harness.plan.bisect import (
    Change,
    Probe,
    ddmin,
    probes_needed,
    search,
    top_level_changes,
    undecided,
)
from harness.plan.cells import Cell
from harness.planning import RunOptions, RunState, load_spec, plan_cells, probe_targets, run_options
from harness.records.bisects import (
    BisectRecord,
    cell_results,
    sentence,
    write_bisect,
    write_finding,
)
from harness.records.store import RunStore, newest_first
from harness.workflow import execute


def cmd_bisect(args: argparse.Namespace) -> int:
    options = replace(run_options(args), sets=(), report=False, fail_on="any", kind="trial")
    if args.between:
        if args.axis or args.good or args.bad:
            raise UsageError("--between compares two runs; --axis/--good/--bad bisect one axis")
        return between_runs(options, *args.between)
    if not args.axis:
        raise UsageError("give --axis (a release bisect) or --between GOOD_RUN BAD_RUN")
    axis = args.axis
    if bool(args.good) != bool(args.bad):
        raise UsageError("give both --good and --bad, or neither (found from the last run)")
    if args.good:
        _check_order(axis, args.good, args.bad)
    cells, distributions = _selected(options, axis)
    # `--only torch=2.2.2 --only torch=2.5.1` chose the cell: a probe at another release of
    # the axis must not be filtered away by them.
    options = replace(options, only=tuple(o for o in options.only
                                          if o.partition("=")[0].strip() != axis))
    spec = cells[0]
    distribution = distributions.get(axis, axis)
    stamp = time.strftime("%Y%m%d-%H%M%S")

    def probe(version: str) -> Probe:
        run_id = f"bisect-{stamp}-{axis}-{version}"
        print(f"bisect: probing {axis} {version} (run {run_id})", flush=True)
        found = _trial(replace(options, sets=((axis, version),)), run_id, spec.case.case_id,
                       spec.case.variant, spec.hardware)
        if len(found) != 1:
            raise UsageError(f"a probe ran {len(found)} cells of {spec.case.label}, not one")
        result = _probe(version, found[0], run_id)
        print(f"bisect: {axis} {version}: {_said(result)}", flush=True)
        return result

    if args.good:
        # Every release from --good to --bad, ends included, before anything is built: an
        # end the index does not have is refused here, not after a build.
        candidates = _between(options, spec, distribution, args.good, args.bad, ends=True)
        good = _recorded(options, axis, args.good, spec) or probe(args.good)
        bad = _recorded(options, axis, args.bad, spec) or probe(args.bad)
        for end in (good, bad):
            if not end.run_id.startswith(f"bisect-{stamp}-"):
                print(f"bisect: {axis} {end.version}: {end.shown}, recorded in run "
                      f"{end.run_id}")
    else:
        good, bad = _from_last_run(options, axis, cells)
        print(f"bisect: from run {bad.run_id or good.run_id}: {axis} {good.version} "
              f"{good.shown}, {bad.version} {bad.shown}")
        candidates = _between(options, spec, distribution, good.version, bad.version)
    for end in (good, bad):
        if end.skipped:
            raise UsageError(f"{axis} {end.version}: its environment could not be built; "
                             "bisect needs both ends to run")
    if good.kind == bad.kind:
        raise UsageError(f"{axis} {good.version} and {bad.version} both give {good.shown}: "
                         "nothing to bisect")
    print(f"bisect: {len(candidates)} releases of {axis} between {good.version} and "
          f"{bad.version}; at most {probes_needed(len(candidates))} to build")
    boundary = search(candidates, good, bad, probe)
    record = BisectRecord(
        bisect_id=f"{stamp}-{spec.case.case_id}-{spec.case.variant}-{axis}".replace("/", "_"),
        axis=axis, case=spec.case.case_id, variant=spec.case.variant, hardware=spec.hardware,
        origin=spec.env.origin, values={k: v for k, v in spec.env.values if k != axis},
        last=boundary.last.to_dict(), first=boundary.first.to_dict(),
        probes=[p.to_dict() for p in boundary.probes], untested=list(boundary.untested),
        created=time.time(), package=requirement_name(distribution))
    print(f"bisect: {spec.case.label} @{spec.hardware} in {spec.env.origin}")
    print("\n".join(f"  {p.version}: {_said(p)}" + (f"  [{p.run_id}]" if p.run_id else "")
                    for p in boundary.probes)
          or "  (no release between them: they are the boundary)")
    # What the failure page will say, word for word.
    print(f"{sentence(record)}; {len(boundary.probes)} of {len(candidates)} releases probed")
    if boundary.untested:
        unbuilt = {p.version: p.reason for p in boundary.probes if p.skipped}
        print(f"bisect: inconclusive: the change is at {boundary.first.version} or at one of "
              "the releases before it that could not be built:")
        print("\n".join(f"  {v}: {unbuilt.get(v) or 'could not be built'}"
                        for v in boundary.untested))
    print(f"bisect: recorded {write_bisect(options.reports_dir, record)}")
    return 1 if boundary.untested else 0


def _check_order(axis: str, good: str, bad: str) -> None:
    """--good and --bad are releases, --good the older: checked before anything is planned."""
    for flag, text in (("--good", good), ("--bad", bad)):
        if parsed(text) is None:
            raise UsageError(f"{flag} {text}: not a release of {axis} (a version, like 2.2.2)")
    if Version(good) == Version(bad):
        raise UsageError(f"--good and --bad are both {axis} {good}: give two releases")
    if Version(good) > Version(bad):
        raise UsageError(f"--good {good} is newer than --bad {bad}: --good is the older "
                         f"release of {axis} (the search goes from it to --bad)")


def _selected(options: RunOptions, axis: str) -> tuple[list[Cell], dict[str, str]]:
    """The selected cells along ``axis`` (one cell apart from it), and axis -> distribution."""
    state = plan_cells(probe_targets(load_spec(RunState(options=options))))
    assert state.plan is not None and state.spec is not None
    cells = [c for c in state.plan.cells if axis in dict(c.env.values)]
    if not cells:
        raise UsageError(f"no selected cell's environment has an axis {axis!r}")
    groups: dict[Any, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(_neutral(cell, axis), []).append(cell)
    if len(groups) > 1:
        shown = "; ".join(f"{c[0].env.name} {c[0].case.label} @{c[0].hardware}"
                          for c in islice(groups.values(), 3))
        raise UsageError(f"the selection holds {len(groups)} cells apart from {axis}, which "
                         f"differ in {_differ(cells, axis)} ({shown}"
                         f"{'; ...' if len(groups) > 3 else ''}): bisect follows one; narrow "
                         "it with -k, --only or --hardware")
    return (sorted(cells, key=lambda c: release_order(dict(c.env.values)[axis])),
            state.spec.distributions)


def _differ(cells: list[Cell], axis: str) -> str:
    """What the cells differ in besides ``axis``: ``transformers (4.46.3, *)``, the case..."""
    facets = [{**{k: v for k, v in c.env.values if k != axis}, "matrix": c.env.origin,
               "case": c.case.label, "hardware": c.hardware} for c in cells]
    seen = {k: sorted({f.get(k, "(none)") for f in facets}) for f in facets for k in f}
    return ", ".join(f"{k} ({', '.join(v)})" for k, v in seen.items() if len(v) > 1)


def _neutral(cell: Cell, axis: str) -> tuple[Any, ...]:
    rest = tuple(sorted((k, v) for k, v in cell.env.values if k != axis))
    return (cell.env.origin, rest, cell.case.label, cell.hardware)


def _trial(options: RunOptions, run_id: str, case: str, variant: str, hardware: str
           ) -> list[CellResult]:
    """Run ``options`` as the run ``run_id``: the results of ``case::variant`` on ``hardware``."""
    execute(RunState(options=replace(options, run_id=run_id)))
    return cell_results(RunStore.open(options.reports_dir, run_id).results(), case, variant,
                        hardware)


def _probe(version: str, result: CellResult, run_id: str) -> Probe:
    return Probe(version=version, outcome=str(result.outcome), signature=result.signature,
                 reason=_first_line(result.reason.strip()), run_id=run_id,
                 skipped=result.unbuilt)


def _said(probe: Probe) -> str:
    return "could not be built (skipped)" if probe.skipped else probe.shown


def _recorded(options: RunOptions, axis: str, version: str, like: Cell) -> Probe | None:
    """``version``'s outcome for the cell from the newest run that has that very cell."""
    state = plan_cells(probe_targets(load_spec(RunState(
        options=replace(options, sets=((axis, version),))))), notes=False)
    assert state.plan is not None
    wanted = {c.cell_id: version for c in state.plan.cells
              if _neutral(c, axis) == _neutral(like, axis)}
    return next((found[0] for _, found in _recorded_runs(options, wanted) if found), None)


def _from_last_run(options: RunOptions, axis: str, cells: list[Cell]) -> tuple[Probe, Probe]:
    """The first two neighbouring values of ``axis`` whose outcomes differ, in the newest run."""
    for run_id, found in _recorded_runs(options, {c.cell_id: dict(c.env.values)[axis]
                                                  for c in cells}):
        probes = sorted((p for p in found if parsed(p.version)),
                        key=lambda p: release_order(p.version))
        for older, newer in pairwise(probes):
            if older.kind != newer.kind:
                return older, newer
        if len(probes) > 1:
            raise UsageError(f"in run {run_id}, {cells[0].case.label} gives "
                             f"{probes[0].shown} at every {axis} it ran: nothing to bisect "
                             "(or give --good and --bad)")
    raise UsageError(f"no recent run has {cells[0].case.label} at two values of {axis}: run "
                     "the matrix first, or give --good and --bad")


def _recorded_runs(options: RunOptions, versions: dict[str, str]
                   ) -> Iterator[tuple[str, list[Probe]]]:
    """Each run, newest first, with the built probes of the cells of ``versions`` (cell id ->
    the axis's release) it ran."""
    for run_dir in newest_first(options.reports_dir):
        store = RunStore(run_dir)
        probes = (_probe(versions[r.cell_id], r, store.run_id) for r in store.results()
                  if r.cell_id in versions and r.outcome is not Outcome.NOT_RUN)
        yield store.run_id, [p for p in probes if not p.skipped]


def _between(options: RunOptions, like: Cell, distribution: str, good: str, bad: str, *,
             ends: bool = False) -> list[str]:
    """The releases strictly between ``good`` and ``bad`` (the older) on the environment's
    indexes, oldest first; ``ends``: refuse an end the indexes lack."""
    low, high = Version(good), Version(bad)
    dist = requirement_name(distribution)
    releases = Releases.for_run(options.matrix, options.find_links, options.offline, "refresh")
    found = releases.resolve(ReleaseQuery(dist=dist, releases=f">={low},<={high}", pick="all"),
                             like.env.python, like.env.index_urls)
    on_index = {Version(v) for v in found.versions}
    for flag, text, version in (("--good", good, low), ("--bad", bad, high)) if ends else ():
        if version not in on_index:
            raise UsageError(f"{flag} {text}: {dist} has no release {text} on the index "
                             f"(for Python {like.env.python})")
    return [v for v in found.versions if Version(v) not in (low, high)]


def between_runs(options: RunOptions, good_run: str, bad_run: str) -> int:
    """``--between``: which top-level package changes between two runs flip the cell."""
    good_store, bad_store = (RunStore.open(options.reports_dir, r) for r in (good_run, bad_run))
    if good_store.run_dir.resolve() == bad_store.run_dir.resolve():
        raise UsageError(f"--between names run {good_store.run_id} twice: give the run where "
                         "the cell has the good outcome, then the one where it has the bad")
    good, bad = _cell(good_store, options), _cell(bad_store, options)
    label = f"{good.case_id}::{good.variant}"
    good_kind, bad_kind = _probe("", good, "").kind, _probe("", bad, "").kind
    if good_kind == bad_kind:
        raise UsageError(f"{label} is {good.outcome} in both runs: nothing flips")
    (before, good_top), (after, bad_top) = _held(good_store, good), _held(bad_store, bad)
    changes, one_sided = top_level_changes(good_top | bad_top, before, after)
    moved = sum(before.get(n) != after.get(n) for n in set(before) | set(after))
    print(f"bisect: {label} @{good.hardware_target}: {good.outcome} in "
          f"{good_store.run_id}, {bad.outcome} in {bad_store.run_id}; "
          f"{plural(len(changes), 'top-level package')} moved (of {moved} packages that moved; "
          "the resolver settles the rest)"
          + (f"; in one environment only: {', '.join(one_sided)}" if one_sided else ""))
    if not changes:
        raise UsageError("no top-level package's version differs between the two "
                         "environments: what flips it is not a package the matrices chose "
                         "(the machine, the case, a flake, or a package only one run holds)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    said: dict[tuple[Change, ...], dict[str, Any]] = {}
    # The trial's cell: in the good cell's matrix, by the axis values both cells share (the
    # others are what the trials set).
    filters = (*(f"{k}={v}" for k, v in good.values.items() if bad.values.get(k) == v),
               f"env={good.environment.split(':', 1)[0]}*")

    def flips(subset: tuple[Change, ...]) -> bool | None:
        count = len(said) + 1
        moving = {name for name, _, _ in subset}
        sets = tuple((name, new if name in moving else old) for name, old, new in changes)
        run_id = f"between-{stamp}-{count}"
        print(f"bisect: trial {count}: {_moves(subset, ', ', '->')}", flush=True)
        found = _trial(replace(options, sets=sets, only=filters, keyword=label,
                               hardware=(good.hardware_target,)), run_id, good.case_id,
                       good.variant, good.hardware_target)
        flipped, outcome, reason = _judge(found, good_kind, bad_kind)
        said[subset] = {"changes": [c[0] for c in subset], "flips": flipped,
                        "outcome": outcome, "reason": reason, "run_id": run_id}
        print(f"bisect: trial {count}: {outcome}"
              + (f": {_first_line(reason)}" if flipped is None else ""), flush=True)
        return flipped

    culprits, trials = ddmin(changes, flips)
    missing = undecided(changes, culprits, trials)
    blind = [s for s in said.values() if s["flips"] is None]
    total = f"{plural(len(trials), 'trial')}" + (
        f", {len(blind)} said nothing" if blind else "")
    if missing:
        print(f"bisect: inconclusive: which of {_moves(culprits)} flips it is not determined "
              f"({total}); what it rests on could not be judged:")
        for subset in missing:
            why = said.get(subset)
            shown = _moves(subset, ", ", "->") or "nothing moved"
            print(f"  {shown}: " + (f"{why['outcome']}: {_first_line(why['reason'])} "
                                     f"[{why['run_id']}]" if why else "not tried"))
    else:
        together = " move together" if len(culprits) > 1 else " moves"
        print(f"bisect: flips when {_moves(culprits)}{together} ({total})")
    record = write_finding(options.reports_dir, f"between-{stamp}", {
        "format": "ml-compat-harness between 2", "good_run": good_store.run_id,
        "bad_run": bad_store.run_id, "case": good.case_id, "variant": good.variant,
        "hardware": good.hardware_target, "changes": changes,
        "verdict": "inconclusive" if missing else "found",
        "culprits": [] if missing else [list(c) for c in culprits],
        "narrowed_to": [list(c) for c in culprits],
        "undetermined": [[c[0] for c in s] for s in missing],
        "trials": [said[t.changes] for t in trials]})
    print(f"bisect: recorded {record}")
    return 1 if missing else 0


def _judge(found: list[CellResult], good: tuple[str, str | None], bad: tuple[str, str | None]
           ) -> tuple[bool | None, str, str]:
    """Whether a trial's cell flipped (None: it says nothing), its outcome, and its reason."""
    if len(found) != 1:
        return None, "NOT RUN", f"the trial ran {len(found)} cells of the case, not one"
    probe, reason = _probe("", found[0], ""), found[0].reason.strip()
    if probe.skipped:
        return None, "could not be built", reason or "its environment was not built"
    if probe.kind in (good, bad):
        return probe.kind == bad, probe.shown, reason
    return None, probe.shown, (f"neither end's outcome: {reason}" if reason
                               else "neither end's outcome")


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _moves(changes: tuple[Change, ...], sep: str = " and ", arrow: str = "→") -> str:
    return sep.join(f"{n} {o} {arrow} {w}" for n, o, w in changes)


def _cell(store: RunStore, options: RunOptions) -> CellResult:
    """The one cell of ``store`` that -k, --hardware and --only (env=GLOB) select."""
    envs = [v.split("=", 1)[1] for v in options.only if v.startswith("env=")]
    found = [r for r in store.results() if r.outcome is not Outcome.NOT_RUN and not r.parent
             and (not options.keyword or any(
                 options.keyword in t or fnmatchcase(t, options.keyword)
                 for t in (f"{r.case_id}::{r.variant}", r.nodeid)))
             and (not options.hardware or r.hardware_target in options.hardware)
             and (not envs or any(fnmatchcase(r.environment, g) for g in envs))]
    # -k mergekit_fp16::repro names that cell, not repro_merged too (-k is also a substring).
    exact = [r for r in found if f"{r.case_id}::{r.variant}" == options.keyword]
    found = exact if len(exact) == 1 else found
    if len(found) != 1:
        raise UsageError(f"run {store.run_id}: the selection holds {len(found)} cells; "
                         "--between follows one (narrow it with -k, --hardware, "
                         "--only env=GLOB)")
    return found[0]


def _held(store: RunStore, result: CellResult) -> tuple[dict[str, str], set[str]]:
    """Every package and version the cell's environment held (the run's envs/ record), and
    those the run's matrix or ``--set`` chose for it."""
    path = store.run_dir / "envs" / f"{result.env_key}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        held = {str(k): str(v) for k, v in (data.get("packages") or {}).items()}
    except (OSError, ValueError, AttributeError):  # none, or not an object of objects (by hand)
        raise UsageError(f"run {store.run_id}: no record of what {result.environment} held "
                         f"({path.name})") from None
    env = (store.meta.get("environments") or {}).get(result.environment) or {}
    return held, {requirement_name(r) for r in env.get("requirements") or ()}

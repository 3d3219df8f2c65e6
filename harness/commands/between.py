"""``harness bisect --between GOOD_RUN BAD_RUN``: which of the top-level packages that moved
between two runs' environments of one cell flip it, by delta debugging.

The top-level packages are those the two runs' matrices or ``--set`` chose (the environments'
requirements). Each trial is an ordinary run of the matrix with those packages pinned to the
good environment's versions except the trial's, which take the bad one's; the resolver
settles the rest, and the environment gets the same import check the two ends had. A trial
judges by the case's outcome: the bad one flips, the good one does not, and one that cannot be
built (or gives a third outcome) says nothing, and why is recorded. An answer that rests on a
trial that said nothing is inconclusive: said, recorded, and the exit status is 1.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from harness.core.errors import UsageError
from harness.core.matrix import requirement_name
from harness.core.results import CellResult, Outcome
from harness.plan.ddmin import Change, ddmin, top_level_changes, undecided
from harness.records.bisects import cell_results, write_finding
from harness.records.store import RunStore
from harness.workflow import RunOptions, RunState, execute


def between_runs(options: RunOptions, good_run: str, bad_run: str) -> int:
    good_store = RunStore.open(options.reports_dir, good_run)
    bad_store = RunStore.open(options.reports_dir, bad_run)
    if good_store.run_dir.resolve() == bad_store.run_dir.resolve():
        raise UsageError(f"--between names run {good_store.run_id} twice: give the run where "
                         "the cell has the good outcome, then the one where it has the bad")
    good, bad = _cell(good_store, options), _cell(bad_store, options)
    good_kind, bad_kind = (str(good.outcome), good.signature), (str(bad.outcome), bad.signature)
    if good_kind == bad_kind:
        raise UsageError(f"{good.case_id}::{good.variant} is {good.outcome} in both runs: "
                         "nothing flips")
    before, after = _packages(good_store, good), _packages(bad_store, bad)
    top = _top_level(good_store, good) | _top_level(bad_store, bad)
    changes, one_sided = top_level_changes(top, before, after)
    moved = sum(before.get(n) != after.get(n) for n in set(before) | set(after))
    print(f"bisect: {good.case_id}::{good.variant} @{good.hardware_target}: {good.outcome} in "
          f"{good_store.run_id}, {bad.outcome} in {bad_store.run_id}; "
          f"{_count(len(changes), 'top-level package')} moved (of {moved} packages that moved; "
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
        print(f"bisect: trial {count}: " + (", ".join(f"{n} {o} -> {w}" for n, o, w in subset)),
              flush=True)
        execute(RunState(options=replace(
            options, sets=sets, run_id=run_id, only=filters, keyword=f"{good.case_id}::"
            f"{good.variant}", hardware=(good.hardware_target,))))
        found = cell_results(RunStore.open(options.reports_dir, run_id).results(),
                             good.case_id, good.variant, good.hardware_target)
        flipped, outcome, reason = _judge(found, good_kind, bad_kind)
        said[subset] = {"changes": [c[0] for c in subset], "flips": flipped,
                        "outcome": outcome, "reason": reason, "run_id": run_id}
        print(f"bisect: trial {count}: {outcome}"
              + (f": {_first_line(reason)}" if flipped is None else ""), flush=True)
        return flipped

    culprits, trials = ddmin(changes, flips)
    missing = undecided(changes, culprits, trials)
    blind = [s for s in said.values() if s["flips"] is None]
    total = f"{_count(len(trials), 'trial')}" + (
        f", {len(blind)} said nothing" if blind else "")
    if missing:
        print(f"bisect: inconclusive: which of {_moves(culprits)} flips it is not determined "
              f"({total}); what it rests on could not be judged:")
        for subset in missing:
            why = said.get(subset)
            shown = ", ".join(f"{n} {o} -> {w}" for n, o, w in subset) or "nothing moved"
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
    """Whether a trial's cell flipped (None: it says nothing), its outcome, and why not (the
    cell's whole reason: an install's error may come after warnings)."""
    if len(found) != 1:
        return None, "NOT RUN", f"the trial ran {len(found)} cells of the case, not one"
    result = found[0]
    reason = result.reason.strip()
    if result.unbuilt:
        return None, "could not be built", reason or "its environment was not built"
    kind = (str(result.outcome), result.signature)
    shown = result.outcome + (f" ({result.signature})" if result.signature else "")
    if kind in (good, bad):
        return kind == bad, shown, reason
    return None, shown, f"neither end's outcome: {reason}" if reason else "neither end's outcome"


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _moves(changes: tuple[Change, ...]) -> str:
    return " and ".join(f"{n} {o} → {w}" for n, o, w in changes)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _top_level(store: RunStore, result: CellResult) -> set[str]:
    """The packages the run's matrix or ``--set`` chose for the cell's environment."""
    env = (store.meta.get("environments") or {}).get(result.environment) or {}
    return {requirement_name(r) for r in env.get("requirements") or ()}


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


def _packages(store: RunStore, result: CellResult) -> dict[str, str]:
    """Every package and version the cell's environment held (the run's envs/ record)."""
    path = store.run_dir / "envs" / f"{result.env_key}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"run {store.run_id}: no record of what {result.environment} held "
                         f"({path.name})") from None
    return {str(k): str(v) for k, v in (data.get("packages") or {}).items()}

"""``harness bisect --between GOOD_RUN BAD_RUN``: which of the packages that moved between
two runs' environments of one cell flip it, by delta debugging.

Each trial is an ordinary run of the matrix with the good environment's versions of every
moved package (``--set NAME==VERSION``) except the trial's, which take the bad run's. A trial
whose environment cannot be built (the versions do not go together) says nothing, and is said.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from harness.core.errors import UsageError
from harness.core.results import CellResult, Outcome
from harness.plan.ddmin import ddmin
from harness.records.bisects import write_finding
from harness.records.store import RunStore
from harness.workflow import RunOptions, RunState, execute

Change = tuple[str, str, str]  # (package, good version, bad version)


def between_runs(options: RunOptions, good_run: str, bad_run: str) -> int:
    good_store = RunStore.open(options.reports_dir, good_run)
    bad_store = RunStore.open(options.reports_dir, bad_run)
    good, bad = _cell(good_store, options), _cell(bad_store, options)
    kind = (str(bad.outcome), bad.signature)
    if (str(good.outcome), good.signature) == kind:
        raise UsageError(f"{good.case_id}::{good.variant} is {good.outcome} in both runs: "
                         "nothing flips")
    before, after = _packages(good_store, good), _packages(bad_store, bad)
    changes = [(name, before[name], after[name]) for name in sorted(set(before) & set(after))
               if before[name] != after[name]]
    came = sorted(set(after) - set(before))
    went = sorted(set(before) - set(after))
    print(f"bisect: {good.case_id}::{good.variant} @{good.hardware_target}: {good.outcome} in "
          f"{good_store.run_id}, {bad.outcome} in {bad_store.run_id}; {len(changes)} packages "
          "moved" + (f"; only in the bad run: {', '.join(came)}" if came else "")
          + (f"; only in the good run: {', '.join(went)}" if went else ""))
    if not changes:
        raise UsageError("no package version differs between the two environments: what "
                         "flips it is not a package (the machine, the case, a flake)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    count = 0
    # The trial's cell: in the good cell's matrix, by the axis values both cells share (the
    # others are what the trials set).
    filters = (*(f"{k}={v}" for k, v in good.values.items() if bad.values.get(k) == v),
               f"env={good.environment.split(':', 1)[0]}*")

    def flips(subset: tuple[Change, ...]) -> bool | None:
        nonlocal count
        count += 1
        moved = {name for name, _, _ in subset}
        sets = tuple((name, new if name in moved else old) for name, old, new in changes)
        run_id = f"between-{stamp}-{count}"
        print(f"bisect: trial {count}: " + (", ".join(f"{n} {o} -> {w}" for n, o, w in subset)),
              flush=True)
        execute(RunState(options=replace(
            options, sets=sets, run_id=run_id, only=filters, keyword=f"{good.case_id}::"
            f"{good.variant}", hardware=(good.hardware_target,))))
        found = [r for r in RunStore.open(options.reports_dir, run_id).results()
                 if r.outcome is not Outcome.NOT_RUN and not r.parent]
        if len(found) != 1 or found[0].unbuilt:
            print(f"bisect: trial {count}: could not be built; it says nothing")
            return None
        result = (str(found[0].outcome), found[0].signature)
        print(f"bisect: trial {count}: {found[0].outcome}", flush=True)
        return result == kind

    culprits, trials = ddmin(changes, flips)
    moved = " and ".join(f"{n} {o} → {w}" for n, o, w in culprits)
    together = " move together" if len(culprits) > 1 else " moves"
    print(f"bisect: flips when {moved}{together} ({len(trials)} trials"
          + (f", {sum(t.flips is None for t in trials)} could not be built" if any(
              t.flips is None for t in trials) else "") + ")")
    record = write_finding(options.reports_dir, f"between-{stamp}", {
        "format": "ml-compat-harness between 1", "good_run": good_store.run_id,
        "bad_run": bad_store.run_id, "case": good.case_id, "variant": good.variant,
        "hardware": good.hardware_target, "changes": changes,
        "culprits": [list(c) for c in culprits],
        "trials": [{"changes": [c[0] for c in t.changes], "flips": t.flips} for t in trials]})
    print(f"bisect: recorded {record}")
    return 0


def _cell(store: RunStore, options: RunOptions) -> CellResult:
    """The one cell of ``store`` that -k, --hardware and --only (env=GLOB) select."""
    envs = [v.split("=", 1)[1] for v in options.only if v.startswith("env=")]
    found = [r for r in store.results() if r.outcome is not Outcome.NOT_RUN and not r.parent
             and (not options.keyword or any(
                 options.keyword in t or fnmatchcase(t, options.keyword)
                 for t in (f"{r.case_id}::{r.variant}", r.nodeid)))
             and (not options.hardware or r.hardware_target in options.hardware)
             and (not envs or any(fnmatchcase(r.environment, g) for g in envs))]
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

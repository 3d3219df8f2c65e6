"""The report of one or more run records (shards of one run, or runs from other machines),
in every format of ``writers.WRITERS``, and what changed between two runs."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from harness.core.results import CellResult, Outcome
from harness.core.rules import Rule
from harness.records import reportinput, table
from harness.records.compare import match_previous
from harness.records.expect import Baseline
from harness.records.store import RunStore
from harness.report.data import Report
from harness.report.data import summary_line as summary_line
from harness.report.writers import write_all


def write_report(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
                 baseline: Baseline | None = None, previous: RunStore | None = None
                 ) -> dict[str, Path]:
    """Every format of ``writers.WRITERS`` into ``out_dir``, the cells in matrix order;
    ``previous``: the run to say what changed since."""
    return write(prepare(stores, out_dir, baseline=baseline, previous=previous), out_dir)


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """``report`` in every format into ``out_dir``, then one record's table if it has none
    (unless damaged: each reader then says so)."""
    paths = write_all(report, out_dir)
    if len(report.stores) == 1 and not report.tabled and not report.stores[0].damaged:
        # in the record's order (the table's), where the same cells win a logical key
        table.write(report.stores[0].run_dir, [r for _, r in report.pairs], report.made_from)
    return paths


def prepare(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
            baseline: Baseline | None = None, previous: RunStore | None = None,
            results: Sequence[CellResult] | None = None, since_in: Path | None = None
            ) -> Report:
    """The report's data, read of the records in one call. ``since_in``: the reports folder
    to find the run before in, where no ``previous`` is given."""
    out_dir.mkdir(parents=True, exist_ok=True)
    got = reportinput.read(stores, previous, results, since_in)
    rules = tuple(Rule.from_dict(d) for d in got.rules)  # a bad one: before any file
    pairs = list(got.pairs)
    if got.plan is not None:
        # Matrix order (the plan's), not completion order: two renders of one run are equal.
        order = {cell_id: i for i, cell_id in enumerate(dict.fromkeys(got.plan))}
        pairs.sort(key=lambda p: (order.get(p[1].cell_id, len(order)), p[1].logical_key,
                                  p[1].cell_id))
    rows = [r for _, r in pairs]

    @functools.cache
    def changes() -> list[dict[str, Any]]:
        if got.changed is not None:
            return diff_pairs(got.changed)
        if got.before is None:
            return []
        # An interrupted run's plan: its cells not run are not gone.
        return diff_runs(got.before, rows, got.moved, frozenset(got.plan or ()))

    return Report(**{f.name: getattr(got, f.name) for f in fields(got)}, rule_set=rules,
                  baseline=baseline, given=results, rows=rows,
                  links=_links(pairs, got.stores, got.log_names, out_dir), changes=changes)

def _links(pairs: Sequence[tuple[RunStore, CellResult]], stores: Sequence[RunStore],
           names: Sequence[frozenset[str]], out_dir: Path) -> list[str]:
    """Each cell's log as a path relative to the report ("" where it has none, or it is not
    there), so that the report and the run folder can move together. ``names``: each store's
    names in logs/ (a listing: no look-up per log there)."""
    report = out_dir.resolve()
    runs = {id(s): (s.run_dir, os.path.relpath(s.run_dir, report), logs)
            for s, logs in zip(stores, names, strict=True)}

    @functools.cache  # many cells share a log: each looked up once
    def link(store: int, log: str | None) -> str:
        run_dir, base, logs = runs[store]
        if not log:
            return ""
        if log.startswith("logs/") and "/" not in log[5:]:
            return f"{base}/{log}" if log[5:] in logs else ""
        if os.path.isabs(log):  # noqa: PTH117  (records before format 2)
            return os.path.relpath(log, report) if Path(log).is_file() else ""
        return f"{base}/{log}" if (run_dir / log).is_file() else ""

    return [link(id(store), row.log) for store, row in pairs]


def diff_runs(old: Sequence[CellResult], new: Sequence[CellResult], moved: Sequence[str] = (),
              planned: Collection[str] = ()) -> list[dict[str, Any]]:
    """What changed between two runs' rows, matched by logical key (a pin change renames the
    content id), in ``_ORDER``. ``moved``: the keys a ``--set`` bump replaced (none is gone);
    ``planned``: the new run's cell ids (one it planned and did not run is not gone)."""
    before = match_previous(old, new, moved)
    after = {r.logical_key: r for r in new}
    changes = [_change("new cell", key, None, now) if key not in before
               else _compared(key, before[key], now) for key, now in after.items()]
    changes += [_change("gone", key, was, None) for key, was in before.items()
                if key not in after and not moved and was.cell_id not in planned]
    if moved:  # a bump: the row of the run before each cell is compared with
        for change in filter(None, changes):
            was = before.get((change["environment"], change["case"], change["hardware"]))
            if was is not None:
                change["replaced"] = was.environment
    return sorted(filter(None, changes), key=_change_order)


def diff_pairs(pairs: Iterable[tuple[CellResult, CellResult]]) -> list[dict[str, Any]]:
    """``diff_runs`` of two runs of the same cells, from the pairs ``table.changed`` gives."""
    return sorted(filter(None, (_compared(now.logical_key, was, now) for was, now in pairs)),
                  key=_change_order)


def _compared(key: tuple[str, str, str], was: CellResult, now: CellResult) -> dict[str, Any] | None:
    """The change of a cell in both runs; None where its outcome and versions stayed."""
    if was.outcome != now.outcome:
        return _change(moved_class(was.outcome, now.outcome), key, was, now)
    if was.versions != now.versions and was.versions and now.versions:
        return _change("versions changed", key, was, now)
    return None


def moved_class(was: Outcome, now: Outcome) -> str:
    """The class of a cell whose outcome changed."""
    return ("new failure" if was.ok and not now.ok else
            "fixed" if not was.ok and now.ok else
            "still failing" if not now.ok else "changed")


_ORDER = {k: i for i, k in enumerate(("new failure", "fixed", "changed", "still failing",
                                      "versions changed", "new cell", "gone"))}


def _change_order(change: dict[str, Any]) -> tuple[int, str, str, str]:
    return (_ORDER[change["class"]], change["environment"], change["case"], change["hardware"])


def _change(kind: str, key: tuple[str, str, str], was: CellResult | None,
            now: CellResult | None) -> dict[str, Any]:
    either = now or was
    change: dict[str, Any] = {
        "class": kind, "environment": key[0], "case": key[1], "hardware": key[2],
        "before": str(was.outcome) if was else "", "after": str(now.outcome) if now else "",
        "cell_id": either.cell_id if either else ""}
    if was is not None and now is not None:
        old_v, new_v = dict(was.versions), dict(now.versions)
        # A bump's cells differ in the axis values it set, named by the fingerprint or not.
        for name in set(was.values) | set(now.values):
            if was.values.get(name) != now.values.get(name) and name not in old_v | new_v:
                old_v[name], new_v[name] = was.values.get(name, "-"), now.values.get(name, "-")
        change["versions"] = {name: f"{old_v.get(name, '-')} -> {new_v.get(name, '-')}"
                              for name in sorted(set(old_v) | set(new_v))
                              if old_v.get(name) != new_v.get(name) and name != "(freeze)"}
    return change

"""The report of one or more run records (several shards of one run, or a run folder copied
from another machine): the long-format data (CSV/JSON, one row per cell), the site and its
markdown (``harness.site``), JUnit, and what changed between two runs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.results import (
    CellResult,
    Outcome,
)
from harness.core.rules import Rule
from harness.records import table
from harness.records.baseline import Baseline
from harness.records.compare import bumped, match_previous
from harness.records.expect import recorded_rules
from harness.records.lines import result_rows
from harness.records.select import choose_records, merged_cases, merged_environments
from harness.records.store import RunStore
from harness.records.table import Row
from harness.report.data import KEY_VERSIONS as KEY_VERSIONS
from harness.report.data import LONG as LONG
from harness.report.data import Cells as _Cells
from harness.report.data import Report, long_columns
from harness.report.data import summary_line as summary_line
from harness.report.writers import write_all

if TYPE_CHECKING:
    import pandas as pd

def merged_results(stores: Sequence[RunStore]) -> list[tuple[RunStore, CellResult]]:
    """Every cell once across the records, chosen as ``harness merge`` chooses. One record
    has each cell once already (``results``): nothing to choose (a tenth of a second of
    each half of a fleet's report)."""
    if len(stores) == 1:
        return [(stores[0], r) for r in stores[0].results()]
    return list(choose_records(stores)[0].values())


def results_frame(results: Sequence[CellResult],
                  logs: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The long table as a pandas frame, for a notebook (the report itself needs no pandas:
    importing it is a fifth of a fleet's report)."""
    import pandas as pd

    links = logs or {}
    return pd.DataFrame(long_columns(results, [links.get(r.cell_id, "") for r in results]))


def write_report(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
                 baseline: Baseline | None = None, previous: RunStore | None = None,
                 results: Sequence[CellResult] | None = None) -> dict[str, Path]:
    """Everything a reader gets, into ``out_dir``: every format in ``writers.WRITERS`` (the
    site: index, a page per documented failure, the capability grid, every cell, its
    markdown twin and the heatmap; the long-format CSV/JSON; JUnit). Cells come in matrix
    order, so the same results give the same bytes. ``previous``: the run to say what
    changed since. ``results``: one record's results as it holds them, when the caller has
    them in memory (a merge that just wrote them), so they are not read back."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = prepare(stores, out_dir, baseline=baseline, previous=previous, results=results)

    def keep_table() -> None:  # what the next night's "what changed", history and
        # baselines read of this run (damaged: each reader reads it, and says so)
        store = report.stores[0]
        if len(report.stores) == 1 and table.current(store.run_dir, ()) is None and not any(
                s.damaged for s in report.stores):
            table.write(store.run_dir, report.cells().in_record, report.made_from)

    return write_all(report, out_dir, keep_table)


def prepare(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
            baseline: Baseline | None = None, previous: RunStore | None = None,
            results: Sequence[CellResult] | None = None) -> Report:
    """The report's data (``write_report``'s arguments), its cells read where first asked,
    with their logs' links from ``out_dir``."""
    stores = [stores] if isinstance(stores, RunStore) else list(stores)
    # Each record as it is now (its size, before it is read): every writer reads these
    # lines, and the table says it was made of them, whatever a run still going appends.
    stamps = [table.stamp(s.run_dir) for s in stores]
    # Quiet: the site names their damaged lines (and counts them in its header).
    stores = [s.as_of(stamp[0] if stamp else None, quiet=True)
              for s, stamp in zip(stores, stamps, strict=True)]
    made_from = stamps[0] if len(stores) == 1 else None
    metas = [s.meta for s in stores]
    rules = tuple(Rule.from_dict(d) for d in recorded_rules(metas))  # a bad one: before any file
    given = results
    moved = bumped(metas)

    @functools.cache
    def cells() -> _Cells:
        """The cells as rows, with their logs' links: one record's read straight from it
        (no result made of a line), else as results made rows."""
        if given is None and len(stores) == 1:
            rows = result_rows(stores[0])
            if rows is not None:
                return _Cells(*_ordered([(stores[0], r) for r in rows], stores, metas, out_dir),
                              decoded=True)
        return _cells(stores, metas, out_dir, given)

    @functools.cache
    def changes() -> list[dict[str, Any]]:
        if previous is None:
            return []
        # The same cells in the same order (a nightly's): compared in the two tables.
        pairs = table.changed(previous.run_dir, stores[0].run_dir) if (
            given is None and len(stores) == 1 and not moved) else None
        if pairs is not None:
            return diff_pairs(pairs)
        before = table.read(previous.run_dir, table.ROWS)
        return diff_runs(before.rows(), table.rows_of(cells().rows), moved)

    return Report(stores=tuple(stores), metas=tuple(metas), cases=merged_cases(stores),
                  environments=merged_environments(metas), rules=rules, baseline=baseline,
                  previous=previous, moved=tuple(moved), given=given, cells=cells,
                  changes=changes, made_from=made_from)


def _cells(stores: Sequence[RunStore], metas: Sequence[dict[str, Any]], out_dir: Path,
           given: Sequence[CellResult] | None) -> _Cells:
    """The records' cells (or ``given``, one record's as its caller holds them) as rows, in
    both orders, with their logs' links from ``out_dir``."""
    if given is not None and len(stores) == 1:
        pairs = [(stores[0], r) for r in given]
    else:
        pairs = merged_results(stores)
    return _Cells(*_ordered(pairs, stores, metas, out_dir))


def _ordered(pairs: list[tuple[RunStore, CellResult]], stores: Sequence[RunStore],
             metas: Sequence[dict[str, Any]], out_dir: Path
             ) -> tuple[list[CellResult], list[CellResult], list[str]]:
    """The cells in the record's order and in the report's, and their logs' links."""
    # The table's rows in the record's order (RunStore.results'), as a reader that makes it
    # from the record would have them: the same cells win a logical key whoever wrote it.
    in_record = [r for _, r in pairs]
    pairs = _report_order(pairs, stores, metas)
    return in_record, [r for _, r in pairs], _links(pairs, stores, out_dir)


def _report_order(pairs: list[tuple[RunStore, CellResult]], stores: Sequence[RunStore],
                  metas: Sequence[dict[str, Any]]) -> list[tuple[RunStore, CellResult]]:
    if len(stores) != 1 or metas[0].get("ordered_cells") != len(pairs):
        return _in_plan_order(pairs, stores)
    return pairs  # a merge wrote them in this order


def _in_plan_order(pairs: list[tuple[RunStore, CellResult]], stores: Sequence[RunStore]
                   ) -> list[tuple[RunStore, CellResult]]:
    """Matrix order (the plan's), not completion order: two renders of one run are equal."""
    order: dict[str, int] = {}
    for store in stores:
        for cell in store.planned():
            order.setdefault(cell["cell_id"], len(order))
    return sorted(pairs, key=lambda p: (order.get(p[1].cell_id, len(order)),
                                        p[1].logical_key, p[1].cell_id))


def _links(pairs: Sequence[tuple[RunStore, CellResult]], stores: Sequence[RunStore],
           out_dir: Path) -> list[str]:
    """Each cell's log as a path relative to the report ("" where it has none, or it is not
    there), in their order, so that the report and the run folder can move together. Each
    run's distinct logs linked once (a batch's cells share one), looked up for the others in
    C (one record: a fleet's report's links, 0.15 s of each half in a loop over its cells)."""
    report = out_dir.resolve()
    linked = {id(s): _Linked(s, report) for s in stores}
    rows = list(map(itemgetter(1), pairs))
    if len(stores) == 1:
        return list(map(linked[id(stores[0])].__getitem__, map(_LOG, rows)))
    return [linked[id(store)][row.log] for store, row in pairs]


_LOG = attrgetter("log")
_CELL_ID = attrgetter("cell_id")


class _Linked(dict[str | None, str]):
    """A run's logs -> their links from the report, each made once: on strings (a pathlib
    object or a stat per cell cost more than the rest of a fleet's report's links), the
    names in its logs/ listed once."""

    def __init__(self, store: RunStore, report: Path) -> None:
        super().__init__()
        self.run_dir, self.report = store.run_dir, report
        self.base = os.path.relpath(store.run_dir, report)
        # Every log there in logs/ linked up front, in C (most cells' logs; one made per
        # distinct log on demand was a third of a fleet's links): the rest on demand.
        names = store.log_names()
        self.update(zip(map("logs/".__add__, names),  # a set: the same order twice
                        map(f"{self.base}/logs/".__add__, names), strict=True))

    def __missing__(self, log: str | None) -> str:
        link = self[log] = self._link(log)
        return link

    def _link(self, log: str | None) -> str:
        if not log or (log.startswith("logs/") and "/" not in log[5:]):
            return ""  # a log in logs/ that is there was linked up front
        if os.path.isabs(log):  # noqa: PTH117  (records before format 2)
            return os.path.relpath(log, self.report) if Path(log).is_file() else ""
        return f"{self.base}/{log}" if os.path.isfile(f"{self.run_dir}/{log}") else ""  # noqa: PTH113


def diff_runs(old: Sequence[Row], new: Sequence[Row], moved: Sequence[str] = ()
              ) -> list[dict[str, Any]]:
    """What changed between two runs, cell by cell, matched by logical key (environment,
    ``case::variant``, hardware), not by content id, which a pin change renames. The runs
    come as table rows (``records.table``): the run before is read from its table, not
    decoded whole.

    Classes: ``new failure`` (was fine, is not), ``fixed``, ``changed`` (fine both times but a
    different outcome: a documented failure that stopped reproducing is news), ``still
    failing`` (listed when its outcome changed), ``new cell``, ``gone``, and
    ``versions changed`` (same outcome, different packages: the key versions or the freeze).
    New failures come first.

    ``moved``: the keys a ``--set`` bump replaced (``torch``): a cell is then matched with
    the cell of the run before whose environment differs only in those keys (of several,
    the one with the newest release: the bump is from there), and cells the bump left
    behind are not "gone"."""
    before = match_previous(old, new, moved)
    after = {r.logical_key: r for r in new}
    changes = []
    for key, now in after.items():
        was = before.get(key)
        if was is None:
            changes.append(_change("new cell", key, None, now))
            continue
        if was.outcome != now.outcome:
            changes.append(_change(_moved(was.outcome, now.outcome), key, was, now))
        elif was.versions != now.versions and was.versions and now.versions:
            changes.append(_change("versions changed", key, was, now))
    changes += [_change("gone", key, was, None) for key, was in before.items()
                if key not in after and not moved]
    if moved:  # a bump: the row of the run before each cell is compared with
        for change in changes:
            was = before.get((change["environment"], change["case"], change["hardware"]))
            if was is not None:
                change["replaced"] = was.environment
    changes.sort(key=_change_order)
    return changes


def diff_pairs(pairs: Iterable[tuple[Row, Row]]) -> list[dict[str, Any]]:
    """``diff_runs`` of two runs of the same cells, each once, from the pairs of rows whose
    outcome or versions may differ (``table.changed``)."""
    changes = []
    for was, now in pairs:
        if was.outcome != now.outcome:
            changes.append(_change(_moved(was.outcome, now.outcome), now.logical_key, was, now))
        elif was.versions != now.versions and was.versions and now.versions:
            changes.append(_change("versions changed", now.logical_key, was, now))
    return sorted(changes, key=_change_order)


def _moved(was: Outcome, now: Outcome) -> str:
    """The class of a cell whose outcome changed."""
    return ("new failure" if was.ok and not now.ok else
            "fixed" if not was.ok and now.ok else
            "still failing" if not now.ok else "changed")


_ORDER = {k: i for i, k in enumerate(("new failure", "fixed", "changed", "still failing",
                                      "versions changed", "new cell", "gone"))}


def _change_order(change: dict[str, Any]) -> tuple[int, str, str, str]:
    return (_ORDER[change["class"]], change["environment"], change["case"], change["hardware"])


def _change(kind: str, key: tuple[str, str, str], was: Row | None,
            now: Row | None) -> dict[str, Any]:
    either = now or was
    change: dict[str, Any] = {
        "class": kind, "environment": key[0], "case": key[1], "hardware": key[2],
        "before": str(was.outcome) if was else "", "after": str(now.outcome) if now else "",
        "cell_id": either.cell_id if either else ""}
    if was is not None and now is not None:
        old_v, new_v = dict(was.versions), dict(now.versions)
        # A bump's cells differ in the axis values it set, whether or not the fingerprint
        # names that package among its key versions.
        for name in set(was.values) | set(now.values):
            if was.values.get(name) != now.values.get(name) and name not in old_v | new_v:
                old_v[name], new_v[name] = was.values.get(name, "-"), now.values.get(name, "-")
        change["versions"] = {name: f"{old_v.get(name, '-')} -> {new_v.get(name, '-')}"
                              for name in sorted(set(old_v) | set(new_v))
                              if old_v.get(name) != new_v.get(name) and name != "(freeze)"}
    return change

"""What a report reads of its records, in one call (``read``): the report climbs into records/
for its inputs once, and works on what it got."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.results import CellResult
from harness.records import history, table
from harness.records.bisects import BisectRecord, read_bisects, reports_dir_of
from harness.records.compare import bumped, choose_records
from harness.records.expect import recorded_rules
from harness.records.store import RunStore, lineage, plan_cells, previous_run, read_meta

#: Runs on the history page, the report's own included.
HISTORY_RUNS = 30


@dataclass(frozen=True)
class Earlier:
    """The runs of a report's line before it (``history.load``), and each one's run.json."""

    history: history.History
    metas: tuple[dict[str, Any] | None, ...]  # ``history.runs``' order
    own: dict[str, Any] | None  # the report's first record's


@dataclass(frozen=True)
class ReportInput:
    """Everything a report reads of its records, read once."""

    stores: tuple[RunStore, ...]  # each as its record was when read (``RunStore.as_of``)
    metas: tuple[dict[str, Any], ...]
    made_from: table.Stamp | None  # one record's size as it was read
    cases: dict[str, Any]
    environments: dict[str, Any]
    rules: tuple[dict[str, Any], ...]  # the rules the records hold, as written
    moved: tuple[str, ...]  # the keys a ``--set`` bump replaced
    pairs: tuple[tuple[RunStore, CellResult], ...]  # each cell once, in the record's order
    # Every planned cell id in matrix order (repeats possible); None: ``pairs`` are in it.
    plan: tuple[str, ...] | None
    log_names: tuple[frozenset[str], ...]  # each store's names in logs/
    previous: RunStore | None
    changed: list[tuple[CellResult, CellResult]] | None  # from the two tables, where they tell
    before: list[CellResult] | None  # else the previous run's, from its table
    bisects: tuple[BisectRecord, ...]  # of the first run's reports folder
    earlier: Earlier
    tabled: bool  # one record whose table is written already


def read(stores: RunStore | Sequence[RunStore], previous: RunStore | None = None,
         given: Sequence[CellResult] | None = None, since_in: Path | None = None
         ) -> ReportInput:
    """What the report of ``stores`` (since ``previous``, else the run before the first in
    ``since_in``) reads of them; ``given``: one record's results, as its caller holds them."""
    stores = [stores] if isinstance(stores, RunStore) else list(stores)
    if previous is None and since_in is not None:
        before = previous_run(since_in, stores[0].run_dir)
        previous = RunStore(before) if before else None
    # Each record as it is now: every format reads these lines, whatever a run appends.
    stamps = [table.stamp(s.run_dir) for s in stores]
    # Quiet: the site names their damaged lines (and counts them in its header).
    stores = [s.as_of(stamp[0] if stamp else None, quiet=True)
              for s, stamp in zip(stores, stamps, strict=True)]
    metas = [s.meta for s in stores]
    moved = bumped(metas)
    # The same cells in the same order (a nightly's): compared in the two tables.
    changed = table.changed(previous.run_dir, stores[0].run_dir) if (
        previous is not None and given is None and len(stores) == 1 and not moved) else None
    # Each cell once: one record's results (or ``given``), else chosen as a merge chooses.
    pairs = tuple(choose_records(stores)[0].values()) if len(stores) > 1 else tuple(
        (stores[0], r) for r in (stores[0].results() if given is None else given))
    run_dir, own = stores[0].run_dir, read_meta(stores[0].run_dir)
    # Quiet: the earlier runs' damaged lines are theirs, named by `harness history`.
    found = history.load(run_dir.parent, last=HISTORY_RUNS - 1, line=lineage(own),
                         before=run_dir, quiet=True)
    earlier = Earlier(history=found, own=own,
                      metas=tuple(read_meta(run_dir.parent / name) for name in found.runs))
    # Asked after the reads above, which may have made it.
    tabled = len(stores) == 1 and table.current(stores[0].run_dir, ()) is not None
    where = reports_dir_of(stores[0].run_dir)
    plan = None
    if len(stores) > 1 or metas[0].get("ordered_cells") != len(pairs):
        with plan_cells(*stores):
            plan = tuple(c["cell_id"] for s in stores for c in s.planned())
    return ReportInput(
        stores=tuple(stores), metas=tuple(metas),
        made_from=stamps[0] if len(stores) == 1 else None,
        # What the records keep of each case and environment, once each (the last one's).
        cases=dict(sorted(ChainMap(*[s.cases for s in reversed(stores)]).items())),
        environments=dict(ChainMap(*[m.get("environments") or {} for m in reversed(metas)])),
        rules=tuple(recorded_rules(metas)),
        moved=tuple(moved), pairs=pairs,
        plan=plan,
        log_names=tuple(s.log_names() for s in stores), previous=previous, changed=changed,
        before=table.read(previous.run_dir).rows()
        if previous is not None and changed is None else None,
        bisects=tuple(read_bisects(where)) if where else (), earlier=earlier, tabled=tabled)


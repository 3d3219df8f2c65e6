"""The report of one or more run records (several shards of one run, or a run folder copied
from another machine): the long-format data (CSV/JSON, one row per cell), the site and its
markdown (``harness.site``), JUnit, and what changed between two runs.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from operator import add, attrgetter, itemgetter, methodcaller, mul, ne
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from harness.core import atomic
from harness.core.bulk import side_by_side
from harness.core.results import (
    CellResult,
    Outcome,
    ResultLike,
    ResultRow,
    as_mapping,
    as_rows,
    labels,
    logical_keys,
)
from harness.core.rules import Rule
from harness.records import report_rows, snapshot
from harness.records.baseline import Baseline
from harness.records.bisects import BisectRecord, read_bisects, reports_dir_of, sentence
from harness.records.compare import bumped, match_previous
from harness.records.damaged import warn as warn_damaged
from harness.records.expect import Judgement, judged_report, recorded_rules
from harness.records.lines import result_rows
from harness.records.select import choose_records, merged_cases, merged_environments
from harness.records.snapshot import FROM_LETTER, Row, Snapshot, rows_of
from harness.records.store import RunStore
from harness.report.check import check_report
from harness.report.csvfile import write_csv
from harness.report.junit import write_junit
from harness.report.longjson import write_long_json
from harness.report.site import history_page
from harness.report.site.model import build_site
from harness.report.site.render import LONG_COLUMNS, markdown, render_site, summary_text

if TYPE_CHECKING:
    import pandas as pd

KEY_VERSIONS = ("torch", "numpy", "transformers", "transformer-engine", "flash-attn")


def merged_results(stores: Sequence[RunStore]) -> list[tuple[RunStore, CellResult]]:
    """Every cell once across the records, chosen as ``harness merge`` chooses. One record
    has each cell once already (``results``): nothing to choose (a tenth of a second of
    each half of a fleet's report)."""
    if len(stores) == 1:
        return [(stores[0], r) for r in stores[0].results()]
    return list(choose_records(stores)[0].values())


#: The long table's columns before the axes (``axis:<name>``, in order of appearance).
LONG = ("environment", "hardware", "column", "outcome", "signature", "reason", "duration",
        "caveat", "cell_id", "attempt", "node", "log", "python", "cuda",
        *(f"v:{k}" for k in KEY_VERSIONS))


def long_columns(results: Sequence[ResultLike], log_links: Sequence[str] | None = None,
                 only: Collection[str] | None = None,
                 labels_of: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """One row per cell, as columns (the CSV, the long table, the heatmap read them).
    ``log_links``: each result's log's link from where the report goes, in their order (""
    for each without one). What a cell's fingerprint says is worked out once per
    fingerprint: cells of one environment share it. ``only``: these columns alone (names of
    ``LONG``; any other is not made, nor an axis), for the pages. ``labels_of``: the
    results' ``labels``, where the caller has them."""

    def facts(found: Any) -> tuple[str, ...]:
        fp = as_mapping(found)
        key, torch = as_mapping(fp.get("key")), as_mapping(fp.get("torch"))
        return (fp.get("python") or "", torch.get("cuda") or ("cpu" if torch else ""),
                *(key.get(k, "") for k in KEY_VERSIONS))

    # A field's column in one pass (in C) over the results, made when a column needs it:
    # rows are slots read in place (a record's CellResults lay all over the heap, and were
    # read in one pass for every field together).
    @functools.cache
    def field(name: str) -> list[Any]:
        return list(map(attrgetter(name), results))

    @functools.cache
    def derived() -> list[tuple[str, ...]]:  # python, cuda, the key versions: as columns
        # Worked out once per fingerprint (the cells of an environment share one object),
        # looked up by its id in C.
        fingerprints = field("fingerprint")
        made = {i: facts(fp) for i, fp in dict(zip(map(id, fingerprints), fingerprints,
                                                   strict=True)).items()}
        return list(zip(*map(made.__getitem__, map(id, fingerprints)), strict=True)) or [
            () for _ in range(2 + len(KEY_VERSIONS))]

    makers: dict[str, Callable[[], list[Any]]] = {
        "environment": lambda: field("environment"),
        "hardware": lambda: field("hardware_target"),
        "column": lambda: labels(results) if labels_of is None else list(labels_of),
        # str.__str__ of an Outcome (a str) is its text, an exact str, in C
        "outcome": lambda: list(map(str.__str__, field("outcome"))),
        "signature": lambda: [s or "" for s in field("signature")],
        "reason": lambda: field("reason"),
        "duration": lambda: field("duration"),
        # Records before format 2 kept the caveat among the details.
        "caveat": lambda: [c or str(d.get("caveat", ""))
                           for c, d in zip(field("caveat"), field("details"), strict=True)],
        "cell_id": lambda: field("cell_id"),
        "attempt": lambda: field("attempt"),
        "node": lambda: field("node"),
        "log": lambda: [""] * len(results) if log_links is None else list(log_links),
        **{name: functools.partial(lambda i: list(derived()[i]), i)
           for i, name in enumerate(LONG[12:])},
    }
    columns = {name: make() for name, make in makers.items() if only is None or name in only}
    if only is None:  # the axes, in order of appearance, a column each (in C)
        values = field("values")
        for axis in dict.fromkeys(chain.from_iterable(values)):
            columns.setdefault(f"axis:{axis}", list(map(methodcaller("get", axis, ""), values)))
    return columns


def results_frame(results: Sequence[CellResult],
                  logs: Mapping[str, str] | None = None) -> pd.DataFrame:
    """The long table as a pandas frame, for a notebook (the report itself needs no pandas:
    importing it is a fifth of a fleet's report)."""
    import pandas as pd

    links = logs or {}
    return pd.DataFrame(long_columns(results, [links.get(r.cell_id, "") for r in results]))


def summary_line(columns: Mapping[str, Sequence[Any]]) -> str:
    counts = Counter(columns.get("outcome", ()))
    parts = [f"{counts[str(o)]} {o}" for o in Outcome if counts[str(o)]]
    envs = len(set(columns.get("environment", ())))
    return (f"{len(columns.get('outcome', ()))} cells in {envs} environments: "
            + (", ".join(parts) or "nothing run"))


def write_report(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
                 baseline: Baseline | None = None, previous: RunStore | None = None,
                 results: Sequence[CellResult] | None = None) -> dict[str, Path]:
    """Everything a reader gets, into ``out_dir``: the site (index, a page per documented
    failure, the capability grid, every cell), its markdown twin, the long-format CSV/JSON,
    JUnit and the heatmap. Cells come in matrix order, so the same results give the same
    bytes. ``previous``: the run to say what changed since. ``results``: one record's
    results as it holds them, when the caller has them in memory (a merge that just wrote
    them), so they are not read back."""
    stores = [stores] if isinstance(stores, RunStore) else list(stores)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Each record as it is now (its size, before it is read): both halves below read these
    # lines, and the snapshot says it was made of them, whatever a run still going appends.
    stamps = [snapshot.stamp(s.run_dir) for s in stores]
    # Quiet: the site's half names their damaged lines (and counts them in its header).
    stores = [s.as_of(stamp[0] if stamp else None, quiet=True)
              for s, stamp in zip(stores, stamps, strict=True)]
    made_from = stamps[0] if len(stores) == 1 else None
    metas = [s.meta for s in stores]
    rules = tuple(Rule.from_dict(d) for d in recorded_rules(metas))  # a bad one: before any file
    given = results
    cases = merged_cases(stores)
    environments = merged_environments(metas)
    moved = bumped(metas)
    since = previous.run_id if previous is not None else None
    name = ", ".join(s.run_id for s in stores)
    paths: dict[str, Path] = {"md": out_dir / "compat.md", "summary": out_dir / "summary.txt",
                              "csv": out_dir / "compat.csv", "json": out_dir / "compat.json",
                              "junit": out_dir / "junit.xml"}

    @functools.cache
    def cells() -> _Cells:
        """The cells as rows, with their logs' links: one record's made from its snapshot
        and the columns a merge keeps beside it, or read straight from it (no result made of
        a line), else as results made rows.
        Each half below reads them in its own process, at once on two cores (with one core,
        or no fork, once); where the caller has them in memory, they are taken before the
        halves part, and shared."""
        if given is None:
            found = _row_cells(stores, metas, out_dir, made_from, current)
            if found is not None:
                return found
        return _cells(stores, metas, out_dir, given)

    before = snapshot.load(previous.run_dir) if previous is not None else None  # made once

    # Where this run's own snapshot is current and holds the cells of the run before in
    # their order (a nightly's), what changed is read off the two snapshots' columns, once,
    # here: not worked out from the cells in each half.
    current = snapshot.read(stores[0].run_dir) if (
        before is not None and given is None and len(stores) == 1) else None
    compared = diff_snapshots(before, current, moved) if before and current else None

    @functools.cache
    def changes() -> list[dict[str, Any]]:
        if before is None:
            return []
        if compared is not None:
            return compared
        return diff_runs(before.rows(), rows_of(cells().rows), moved)

    def data_files() -> str:  # the verdicts, the downloads, JUnit and the run's snapshot
        rows = cells().rows
        keys = logical_keys(rows)  # JUnit's order; their middles, the long table's column
        write_junit(rows, f"ml-compat-harness {name}", paths["junit"], keys)
        columns = long_columns(rows, cells().links, labels_of=list(map(itemgetter(1), keys)))
        lines, notable = judged_report(rows, rules, baseline, limit=200)
        write_csv(paths["csv"], columns)
        write_long_json(paths["json"], {
            "run_id": name, "runs": [s.run_id for s in stores], "summary": summary_line(columns),
            "cases": cases}, rows, {
            "changes": changes(), "since": since,
            "expectations": [_verdict(r, j) for r, j in notable]}, decoded=cells().decoded)
        if len(stores) == 1 and not snapshot.is_current(stores[0].run_dir) and not any(
                s.damaged for s in stores):  # (damaged: each reader reads it, and says so)
            # what the next night's "what changed", history and baselines read of this run
            snapshot.write(stores[0].run_dir, cells().in_record, made_from)
        return "\n".join(lines)  # for compat.md

    def site_files() -> dict[str, Path]:  # the pages and their markdown twin
        # As tuples: the model reads each cell a dozen times over (a fleet's model took
        # 2.0 s from the records' objects, 0.9 s from these, which take 0.2 s to make).
        results, logs = cells().rows, cells().logs()
        found = [d for s in stores for d in s.damaged]
        warn_damaged(found)
        columns = long_columns(results, cells().links, LONG_COLUMNS)
        site = build_site(results, environments, cases, metas, logs, changes(), since,
                          bisects=_bisects(stores, {r.case_id for r in results}),
                          damaged=len(found) + sum(int(m.get("damaged_lines") or 0)
                                                   for m in metas))
        long_rows = list(zip(*(columns[c] for c in LONG_COLUMNS), strict=True))
        pages = render_site(site, out_dir, long_rows, _heatmap(columns), history_page.load(
            results, site, stores[0].run_dir, out_dir, [s.run_id for s in stores]))
        with open(md, "w", encoding="utf-8") as fh:  # all but its end (the verdicts)
            fh.writelines(line + "\n" for line in markdown(site))
        paths["summary"].write_text(summary_text(site), encoding="utf-8")  # what it prints
        return pages

    def site_apart() -> None:  # the site's half in a process of its own, its pages named
        paths.update(side_by_side(site_files, lambda: None, "writing the site"))

    if given is not None:
        cells()
    # compat.md: written beside it by the site's half, ended once both halves are done, then
    # put in its place (a reader never sees half of it).
    md = atomic.temporary(paths["md"])
    try:
        # A fleet's report: the site and the rest (judging too, its summary back for
        # compat.md's end) on a core each, at once, each half in a process of its own (with
        # one core, no fork or other threads running, here in turn), this one waiting: a
        # half that ends frees nothing it read (a fleet's rows took 0.1 s to free), and this
        # one read nothing, unless its caller gave it the cells (both halves share them).
        against = side_by_side(data_files, site_apart,
                               "judging, writing compat.csv, compat.json and junit.xml")
        with open(md, "a", encoding="utf-8") as fh:
            fh.write(f"\n## Against expectations\n\n```\n{against}\n```\n"
                     + _case_lines(cases) + "\n")
        md.replace(paths["md"])
    finally:
        md.unlink(missing_ok=True)
    if os.environ.get("HARNESS_CHECK_REPORTS") == "1":  # the test suite: every report checked
        checked = merged_results(stores) if given is None else [(stores[0], r) for r in given]
        problems = check_report(out_dir, [r for _, r in _report_order(checked, stores, metas)],
                                environments, cases,
                                previous.results() if previous is not None else None, moved,
                                reports_dir_of(stores[0].run_dir))
        if problems:
            raise RuntimeError("the report contradicts its record:\n" + "\n".join(problems))
    return paths


@dataclass(frozen=True)
class _Cells:
    """What a report is made of, read once per process: each cell's last attempt as a row."""

    in_record: list[ResultRow]  # in the record's order (the snapshot's)
    rows: list[ResultRow]  # the same, in plan order (the report's)
    links: list[str]  # each row's log's link from the report ("": none)
    decoded: bool = False  # read straight from the record: every value as JSON decoded it

    def logs(self) -> dict[str, str]:
        """Cell id -> its log's link (made where asked: the downloads read the links in
        order, and a fleet's 100,000 made a dict in 0.05 s)."""
        return dict(zip(map(_CELL_ID, self.rows), self.links, strict=True))


def _cells(stores: Sequence[RunStore], metas: Sequence[dict[str, Any]], out_dir: Path,
           given: Sequence[CellResult] | None) -> _Cells:
    """The records' cells (or ``given``, one record's as its caller holds them) as rows, in
    both orders, with their logs' links from ``out_dir``."""
    if given is not None and len(stores) == 1:
        pairs = [(stores[0], r) for r in given]
    else:
        pairs = merged_results(stores)
    rows = as_rows(r for _, r in pairs)
    return _Cells(*_ordered([(s, row) for (s, _), row in zip(pairs, rows, strict=True)],
                            stores, metas, out_dir))


def _row_cells(stores: Sequence[RunStore], metas: Sequence[dict[str, Any]], out_dir: Path,
               made_from: snapshot.Stamp | None, current: Snapshot | None) -> _Cells | None:
    """One record's cells as rows: made from its snapshot (``current``, where it is read
    already) and the columns beside it where both were made from the record as
    ``made_from`` found it (``report_rows``: a merge's), else read straight from it
    (``lines.result_rows``); in both orders, with their logs' links. None where the record
    is not read that way."""
    if len(stores) != 1:
        return None
    rows = report_rows.read(stores[0].run_dir, made_from, current) if (
        made_from is not None) else None
    if rows is None:
        rows = result_rows(stores[0])
    if rows is None:
        return None
    return _Cells(*_ordered([(stores[0], r) for r in rows], stores, metas, out_dir),
                  decoded=True)


def _ordered(pairs: list[tuple[RunStore, ResultRow]], stores: Sequence[RunStore],
             metas: Sequence[dict[str, Any]], out_dir: Path
             ) -> tuple[list[ResultRow], list[ResultRow], list[str]]:
    """The cells in the record's order and in the report's, and their logs' links."""
    # The snapshot's rows in the record's order (RunStore.results'), as a reader that makes it
    # from the record would have them: the same cells win a logical key whoever wrote it.
    in_record = [r for _, r in pairs]
    pairs = _report_order(pairs, stores, metas)
    return in_record, [r for _, r in pairs], _links(pairs, stores, out_dir)


R = TypeVar("R", CellResult, ResultRow)


def _report_order(pairs: list[tuple[RunStore, R]], stores: Sequence[RunStore],
                  metas: Sequence[dict[str, Any]]) -> list[tuple[RunStore, R]]:
    if len(stores) != 1 or metas[0].get("ordered_cells") != len(pairs):
        return _in_plan_order(pairs, stores)
    return pairs  # a merge wrote them in this order


def _in_plan_order(pairs: list[tuple[RunStore, R]], stores: Sequence[RunStore]
                   ) -> list[tuple[RunStore, R]]:
    """Matrix order (the plan's), not completion order: two renders of one run are equal."""
    order: dict[str, int] = {}
    for store in stores:
        for cell in store.planned():
            order.setdefault(cell["cell_id"], len(order))
    return sorted(pairs, key=lambda p: (order.get(p[1].cell_id, len(order)),
                                        p[1].logical_key, p[1].cell_id))


def _heatmap(columns: Mapping[str, Sequence[Any]]) -> list[list[Outcome | None]]:
    """Rows: environment @ hardware, in the table's order; columns: case variants, sorted."""
    names = sorted(set(columns["column"]))
    at = {name: i for i, name in enumerate(names)}
    rows: dict[tuple[str, str], list[Outcome | None]] = {}
    outcomes = {str(o): o for o in Outcome}  # a lookup, not an Enum call per cell
    for env, hw, name, outcome in zip(columns["environment"], columns["hardware"],
                                      columns["column"], columns["outcome"], strict=True):
        row = rows.get((env, hw))
        if row is None:
            row = rows[(env, hw)] = [None] * len(names)
        row[at[name]] = outcomes[outcome]
    return list(rows.values())


def _verdict(result: ResultRow, judged: Judgement) -> dict[str, Any]:
    """A deviation from what was expected, or a failure that was (with why)."""
    return {"environment": result.environment,
            "case": f"{result.case_id}::{result.variant}",
            "hardware": result.hardware_target, "outcome": str(result.outcome),
            "expected": sorted(str(o) for o in judged.expected), "status": judged.status,
            "why": judged.why}


def _links(pairs: Sequence[tuple[RunStore, ResultLike]], stores: Sequence[RunStore],
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


def _case_lines(cases: dict[str, Any]) -> str:
    """Each case once: its documented failure, links, signatures (from the run record)."""
    if not cases:
        return ""
    lines, seen = ["", "", "## Cases", ""], set()
    for meta in cases.values():
        if meta["case"] in seen:
            continue
        seen.add(meta["case"])
        links = " ".join(f"<{u}>" for u in meta.get("upstream", ()))
        lines.append(f"- **{meta['case']}**: {meta.get('failure') or meta.get('title')}"
                     + (f" ({links})" if links else ""))
        variants = [m for m in cases.values() if m["case"] == meta["case"]]
        for v in variants:
            sigs = ", ".join(f"`{s['name']}`" for s in v.get("signatures", ()))
            notes = "; ".join(v.get("caveats", ()))
            lines.append(f"  - `{v['variant']}`" + (f": reproduces {sigs}" if sigs else "")
                         + (f" (caveat: {notes})" if notes else ""))
    return "\n".join(lines)


def _bisects(stores: Sequence[RunStore], case_ids: set[str]) -> dict[str, list[str]]:
    """What bisects found for these cases, newest per cell and axis (from the reports folder
    of the first run)."""
    where = reports_dir_of(stores[0].run_dir) if stores else None
    newest: dict[tuple[Any, ...], BisectRecord] = {}
    for record in read_bisects(where) if where else []:
        if record.case in case_ids:
            newest[(record.case, record.variant, record.hardware, record.origin,
                    tuple(sorted(record.values.items())), record.axis)] = record
    out: dict[str, list[str]] = {}
    for record in newest.values():
        out.setdefault(record.case, []).append(sentence(record))
    return out


def diff_runs(old: Sequence[Row], new: Sequence[Row], moved: Sequence[str] = ()
              ) -> list[dict[str, Any]]:
    """What changed between two runs, cell by cell, matched by logical key (environment,
    ``case::variant``, hardware), not by content id, which a pin change renames. The runs
    come as snapshot rows (``records.snapshot``): the run before is read from its snapshot,
    not decoded whole.

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


def diff_snapshots(old: Snapshot, new: Snapshot, moved: Sequence[str] = ()
                   ) -> list[dict[str, Any]] | None:
    """``diff_runs`` of the two runs' snapshot rows, where the runs hold the same cells'
    logical keys in the same order, each key once (a nightly against the night before):
    cell by cell, by position, on the outcome letters and the versions' codes, a row made
    only for a cell that changed. None where that is not so (another key, a key twice, a
    ``--set`` bump): then ``diff_runs`` it is."""
    if moved or old.keys_digest != new.keys_digest or len(old) != len(new) or not _plain(new):
        return None
    # The digest is of the keys' columns (tables and codes): equal, the keys are the same,
    # in the same order. Each once: no two cells of one column of codes, and no two
    # (case, variant) pairs that read as one label ("a::b" + "c" and "a" + "b::c").
    cases, variants = new.codes("case_id"), new.codes("variant")
    pairs = set(zip(cases, variants, strict=True))
    labels = {f"{new.table('case_id')[c]}::{new.table('variant')[v]}" for c, v in pairs}
    # Each cell's key as one number (its codes in mixed radix, in C): a set of 100,000
    # tuples of four was half of this comparison.
    keys: Iterable[int] = new.codes("environment")
    for name in ("case_id", "variant", "hardware_target"):
        keys = map(add, map(mul, keys, repeat(len(new.table(name)))), new.codes(name))
    if len(labels) != len(pairs) or len(set(keys)) != len(new):
        return None
    # The places whose letters differ, found in C (a loop over a fleet's 100,000 letters
    # was a tenth of a second before the report's halves part); each pair of letters
    # classed once.
    places = range(len(new))
    differ = list(compress(places, map(ne, old.letters, new.letters)))
    classed = {(a, b): _moved(FROM_LETTER[a], FROM_LETTER[b])
               for a, b in set(zip(map(old.letters.__getitem__, differ),
                                   map(new.letters.__getitem__, differ), strict=True))}
    kinds = dict(zip(differ, map(classed.__getitem__, zip(
        map(old.letters.__getitem__, differ), map(new.letters.__getitem__, differ),
        strict=True)), strict=True))  # a cell that changed, by its place -> how
    # The same outcome, other versions (both known): each pair of codes compared once.
    old_versions, new_versions = old.table("versions"), new.table("versions")
    old_codes, new_codes = old.codes("versions"), new.codes("versions")
    moved_on = {(a, b) for a, b in set(zip(old_codes, new_codes, strict=True))
                if (was_v := old_versions[a]) and (now_v := new_versions[b]) and was_v != now_v}
    if moved_on:
        for i in compress(places, map(moved_on.__contains__,
                                      zip(old_codes, new_codes, strict=True))):
            kinds.setdefault(i, "versions changed")
    at = sorted(kinds)
    changes = [_change(kinds[i], now.logical_key, was, now) for i, was, now in zip(
        at, old.rows_at(at), new.rows_at(at), strict=True)]
    return sorted(changes, key=_change_order)


def _moved(was: Outcome, now: Outcome) -> str:
    """The class of a cell whose outcome changed."""
    return ("new failure" if was.ok and not now.ok else
            "fixed" if not was.ok and now.ok else
            "still failing" if not now.ok else "changed")


def _plain(run: Snapshot) -> bool:
    """Whether the snapshot's tables hold what the harness writes (texts; the axes' values
    texts): a table keeps one entry for values equal in Python (a hand-written 1, 1.0 and
    true), where the record itself, which ``diff_runs`` reads, tells them apart."""
    texts = (run.table(name) for name in ("environment", "case_id", "variant",
                                          "hardware_target"))
    return (all(set(map(type, table)) <= {str} for table in texts)
            and set(map(type, run.table("signature"))) <= {str, type(None)}
            and all(set(map(type, axes)) | set(map(type, axes.values())) <= {str}
                    for axes in run.table("values")))


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

"""The history page (history.html): each cell of the report over the last runs of its line
(the same matrix and kind, ``records.runs.lineage``) as a strip of outcome colours, newest
right, the flaky ones marked, and the run where each first changed.

``page`` is pure: the report's rows, its site and the earlier runs (``records.history``) in,
the page's data out. ``load`` reads the earlier runs and their run.json, for ``page``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.core.results import Outcome, ResultLike, logical_key
from harness.records import history
from harness.records.runs import lineage, read_meta
from harness.report.site.model import PROBES, Site

#: Runs on the page, the report's own included.
RUNS = 30
#: Past this many cells, only those that changed or are flaky get a row (a fleet's 100,000
#: strips would be a page no browser opens); the rest are counted.
MAX_ROWS = 2000

Strip = tuple[Outcome | None, ...]  # one outcome per run, oldest first; None: not in it


@dataclass(frozen=True, kw_only=True)
class Run:
    """A column: a run of the line, its date and its report's index (relative), if any."""

    run_id: str
    date: str
    link: str


@dataclass(frozen=True, kw_only=True)
class Cell:
    environment: str
    variant: str
    hardware: str
    strip: Strip
    flaky: bool
    changed: int | None  # the run (its index) whose outcome first differed from the one before

    @property
    def squares(self) -> tuple[tuple[str, str], ...]:
        """Each run's (css class, outcome) for the strip; absent: ``absent``, ''."""
        return tuple((_css(o), str(o)) if o is not None else ("absent", "")
                     for o in self.strip)


@dataclass(frozen=True, kw_only=True)
class Group:
    """The cells of one case, as the index lists it: its title, its page, its cells."""

    case: str
    page: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, kw_only=True)
class HistoryPage:
    runs: tuple[Run, ...]  # oldest first; the report's own last
    line: tuple[str, str]  # matrix, kind
    left_out: int  # earlier runs of the folder of another matrix or kind
    groups: tuple[Group, ...]
    steady: int  # cells the same in every run not shown (past MAX_ROWS)

    @property
    def legend(self) -> tuple[tuple[str, str], ...]:
        return (*((_css(o), str(o)) for o in Outcome), ("absent", "not in the run"))


def first_change(strip: Strip) -> int | None:
    """The index of the first run whose outcome differs from the run before that ran the
    cell (as ``History.flips`` counts: absent and NOT_RUN runs are passed over)."""
    last = None
    for i, outcome in enumerate(strip):
        if outcome is None or outcome is Outcome.NOT_RUN:
            continue
        if last is not None and outcome != last:
            return i
        last = outcome
    return None


def page(rows: Sequence[ResultLike], site: Site, earlier: history.History,
         runs: Sequence[Run]) -> HistoryPage:
    """``runs``: the earlier runs' columns (``earlier.runs``' order), then the report's."""
    none: Strip = (None,) * len(earlier.runs)
    made: dict[tuple[int, Outcome], tuple[Strip, bool, int | None]] = {}
    by_case: dict[str, dict[tuple[str, str, str], Cell]] = {}
    for r in rows:
        key = logical_key(r.environment, r.case_id, r.variant, r.hardware_target)
        before = earlier.cells.get(key, none)
        # Most cells share their strip (``history.load``): each distinct one worked out once.
        found = made.get((id(before), r.outcome))
        if found is None:
            strip = (*before, r.outcome)
            found = made[(id(before), r.outcome)] = (strip, earlier.flaky(strip),
                                                     first_change(strip))
        by_case.setdefault(r.case_id, {})[key] = Cell(
            environment=r.environment, variant=r.variant, hardware=r.hardware_target,
            strip=found[0], flaky=found[1], changed=found[2])
    count = sum(map(len, by_case.values()))
    pages = {f.case: f"failure-{f.slug}.html" for f in site.failures}
    pages |= {t.suite: f"suite-{t.slug}.html" for t in site.suites}
    pages[PROBES] = "probes.html"
    # The index's order: the failures, then the suites; the probes (the grid), then anything
    # else, as the report met them.
    order = [f.case for f in site.failures] + [t.suite for t in site.suites] + [
        PROBES, *by_case]
    groups = []
    for case in dict.fromkeys(c for c in order if c in by_case):
        cells = tuple(c for c in by_case[case].values()
                      if count <= MAX_ROWS or c.flaky or c.changed is not None)
        if cells:
            groups.append(Group(case=case, page=pages.get(case, ""), cells=cells))
    return HistoryPage(runs=tuple(runs), line=earlier.line, left_out=earlier.left_out,
                       groups=tuple(groups),
                       steady=count - sum(len(g.cells) for g in groups))


def load(rows: Sequence[ResultLike], site: Site, run_dir: Path, out_dir: Path,
         run_ids: Sequence[str]) -> HistoryPage:
    """The page of the report of ``run_dir`` (its first record) written to ``out_dir``: the
    runs of its folder of its line made before it, the last ``RUNS - 1`` of them."""
    meta = read_meta(run_dir)
    earlier = history.load(run_dir.parent, last=RUNS - 1, line=lineage(meta), before=run_dir)
    runs = [_run(run_dir.parent / name, out_dir) for name in earlier.runs]
    own = Run(run_id=", ".join(run_ids), date=_date(meta), link="index.html")
    return page(rows, site, earlier, [*runs, own])


def _css(outcome: Outcome) -> str:
    """The site's class of an outcome's colours (``model.Badge.css``)."""
    return "o-" + str(outcome).lower().replace("_", "-")


def _run(run_dir: Path, out_dir: Path) -> Run:
    report = run_dir / "report" / "index.html"
    return Run(run_id=run_dir.name, date=_date(read_meta(run_dir)),
               link=os.path.relpath(report, out_dir) if report.is_file() else "")


def _date(meta: dict[str, object] | None) -> str:
    created = (meta or {}).get("created")
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(created)) if isinstance(
        created, int | float) and created > 0 else ""

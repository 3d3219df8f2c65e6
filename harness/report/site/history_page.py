"""history.html: each cell over the last runs of its line (``records.store.lineage``) as a
strip of outcome colours, newest right, the flaky ones marked, and where each first changed."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

from markupsafe import Markup, escape

from harness.core.results import CellResult, Outcome, logical_keys
from harness.records import history
from harness.records.reportinput import Earlier
from harness.report.site.model import PROBES, Site, css

#: Past this many cells, only this many that changed last get a row; the rest are counted.
MAX_ROWS = 1000

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
    steady: int  # cells the same in every run: not shown past MAX_ROWS
    older: int  # cells that changed before those shown: not shown (past MAX_ROWS)

    def squares(self, strip: Strip) -> Markup:
        """A strip as HTML, a square a run."""
        return Markup("".join(
            f'<span class="{css(o) if o is not None else "absent"}" title="'
            f'{escape(run.run_id)}: {o if o is not None else "not in this run"}"></span>'
            for o, run in zip(strip, self.runs, strict=True)))

    @property
    def legend(self) -> tuple[tuple[str, str], ...]:
        return (*((css(o), str(o)) for o in Outcome), ("absent", "not in the run"))


def turns(strip: Strip) -> tuple[int, ...]:
    """The runs whose outcome differs from the last that ran the cell (``History.flips``)."""
    found, last = [], None
    for i, outcome in enumerate(strip):
        if outcome is None or outcome is Outcome.NOT_RUN:
            continue
        if last is not None and outcome != last:
            found.append(i)
        last = outcome
    return tuple(found)


def page(rows: Sequence[CellResult], site: Site, earlier: history.History,
         runs: Sequence[Run]) -> HistoryPage:
    """``runs``: the earlier runs' columns, then the report's. Past ``MAX_ROWS`` cells, the
    ``MAX_ROWS`` that changed last."""
    absent = (None,) * len(earlier.runs)
    # Each distinct strip (one object per earlier strip) and outcome worked out once.
    made: dict[tuple[int, Outcome], tuple[Strip, bool, tuple[int, ...]]] = {}
    facts = []
    for before, r in zip(map(earlier.cells.get, logical_keys(rows), repeat(absent)), rows,
                         strict=True):
        fact = made.get((id(before), r.outcome))
        if fact is None:
            strip = (*before, r.outcome)
            fact = made[(id(before), r.outcome)] = (strip, earlier.flaky(strip), turns(strip))
        facts.append(fact)
    moved = [i for i, (_, flaky, found) in enumerate(facts) if flaky or found]
    over = len(facts) > MAX_ROWS
    shown: Sequence[int] = range(len(facts))
    if over:  # the cells whose last change is newest; then report order
        shown = sorted(sorted(moved, key=lambda i: -(facts[i][2] or (-1,))[-1])[:MAX_ROWS])
    by_case: dict[str, list[Cell]] = {}
    for i in shown:
        r, (strip, flaky, found) = rows[i], facts[i]
        by_case.setdefault(r.case_id, []).append(Cell(
            environment=r.environment, variant=r.variant, hardware=r.hardware_target,
            strip=strip, flaky=flaky, changed=found[0] if found else None))
    # The index's order: failures, suites, probes, then the rest as met.
    pages = {f.case: f"failure-{f.slug}.html" for f in site.failures} | {
        t.suite: f"suite-{t.slug}.html" for t in site.suites} | {PROBES: "probes.html"}
    groups = tuple(Group(case=case, page=pages.get(case, ""), cells=tuple(by_case[case]))
                   for case in dict.fromkeys(c for c in [*pages, *by_case] if c in by_case))
    return HistoryPage(runs=tuple(runs), line=earlier.line, left_out=earlier.left_out,
                       groups=groups, steady=len(facts) - len(moved) if over else 0,
                       older=len(moved) - len(shown) if over else 0)


def load(rows: Sequence[CellResult], site: Site, earlier: Earlier, out_dir: Path,
         run_ids: Sequence[str]) -> HistoryPage:
    """The page of a report in ``out_dir``, with the runs of its line before it."""
    found = earlier.history
    runs = []
    for name, meta in zip(found.runs, earlier.metas, strict=True):
        index = found.folder / name / "report" / "index.html"
        runs.append(Run(run_id=name, date=_date(meta),
                        link=os.path.relpath(index, out_dir) if index.is_file() else ""))
    own = Run(run_id=", ".join(run_ids), date=_date(earlier.own), link="index.html")
    return page(rows, site, found, [*runs, own])


def _date(meta: dict[str, object] | None) -> str:
    created = (meta or {}).get("created")
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(created)) if isinstance(
        created, int | float) and created > 0 else ""

"""The report's formats by name: a format is a ``write`` (the report's data and the folder in,
the paths it wrote out) and a line in ``WRITERS``, or ``register`` at run time."""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.core import atomic
from harness.records.store import warn_damaged
from harness.report import junit, longjson
from harness.report.data import Report, heatmap, summary_line
from harness.report.site import history_page
from harness.report.site.render import LONG_COLUMNS, markdown, render_site, summary_text

Write = Callable[[Report, Path], dict[str, Path]]


def write_csv(path: Path, columns: Mapping[str, Sequence[Any]]) -> None:
    """compat.csv: the header (the columns' names), then a line per row of ``columns`` (of one
    length), as ``csv.writer`` writes it."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        # With csv's own line end ("\r\n") a field holding a lone CR is quoted too; each row
        # is written ending in "\n".
        writer = csv.writer(SimpleNamespace(write=lambda row: fh.write(row[:-2] + "\n")))
        writer.writerow(columns)
        writer.writerows(zip(*columns.values(), strict=True))


def _junit(report: Report, out_dir: Path) -> dict[str, Path]:
    """The report's junit.xml, a testcase per row."""
    return {"junit": junit.write_junit(report.rows, f"ml-compat-harness {report.name}",
                                       out_dir / "junit.xml", report.keys)}


def _json(report: Report, out_dir: Path) -> dict[str, Path]:
    """The report's compat.json."""
    path = out_dir / "compat.json"
    longjson.write_long_json(path, {
        "run_id": report.name, "runs": [s.run_id for s in report.stores],
        "summary": summary_line(report.columns), "cases": report.cases}, report.rows, {
        "changes": report.changes(), "since": report.since,
        "expectations": [longjson.expectation(r, j) for r, j in report.judged[1]]})
    return {"json": path}


def _csv(report: Report, out_dir: Path) -> dict[str, Path]:
    """The report's compat.csv: the long table (``Report.columns``), a line per cell."""
    write_csv(out_dir / "compat.csv", report.columns)
    return {"csv": out_dir / "compat.csv"}


def _site(report: Report, out_dir: Path) -> dict[str, Path]:
    """The pages, compat.md (put in its place whole) and summary.txt (``site.render``)."""
    columns = report.columns
    warn_damaged([d for s in report.stores for d in s.damaged])  # found as the cells were read
    long_rows = list(zip(*(columns[c] for c in LONG_COLUMNS), strict=True))
    history = history_page.load(report.rows, report.site, report.earlier, out_dir,
                                [s.run_id for s in report.stores])
    paths = render_site(report.site, out_dir, long_rows, heatmap(columns), history)
    paths["md"], paths["summary"] = out_dir / "compat.md", out_dir / "summary.txt"
    with atomic.replacing(paths["md"], text=True) as fh:
        fh.write(markdown(report.site, report.judged[0], report.cases))
    paths["summary"].write_text(summary_text(report.site), encoding="utf-8")
    return paths


WRITERS: dict[str, Write] = {"junit": _junit, "csv": _csv, "json": _json,
                             "site": _site}
#: The format written in this process while a worker process writes the others.
HERE = "site"


def register(name: str, write: Write) -> None:
    """One more format, written with the others from then on (a name taken is replaced)."""
    WRITERS[name] = write


def write_all(report: Report, out_dir: Path) -> dict[str, Path]:
    """Every registered format into ``out_dir``: the paths written, by name.
    The worker is forked, so it is given the report as it is here, not a pickled copy."""
    with ProcessPoolExecutor(1, mp_context=get_context("fork"), initializer=_given.extend,
                             initargs=((report, out_dir),)) as pool:
        there = {name: pool.submit(_write, name) for name in WRITERS if name != HERE}
        written = {HERE: WRITERS[HERE](report, out_dir)} if HERE in WRITERS else {}
        written.update((name, future.result()) for name, future in there.items())
    return {key: path for name in WRITERS for key, path in written[name].items()}


_given: list[Any] = []  # in the worker: the report and its folder


def _write(name: str) -> dict[str, Path]:
    return WRITERS[name](*_given)

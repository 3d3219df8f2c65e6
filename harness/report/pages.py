"""The site format: the pages, compat.md and summary.txt (``site.render``)."""

from __future__ import annotations

from pathlib import Path

from harness.core import atomic
from harness.records.store import warn_damaged
from harness.report.data import Report, heatmap
from harness.report.site import history_page
from harness.report.site.render import LONG_COLUMNS, markdown, render_site, summary_text


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """The pages, compat.md (put in its place whole) and summary.txt."""
    columns = report.columns
    warn_damaged([d for s in report.stores for d in s.damaged])  # found as the cells were read
    long_rows = list(zip(*(columns[c] for c in LONG_COLUMNS), strict=True))
    history = history_page.load(report.cells.rows, report.site, report.earlier, out_dir,
                                [s.run_id for s in report.stores])
    paths = render_site(report.site, out_dir, long_rows, heatmap(columns), history)
    paths["md"], paths["summary"] = out_dir / "compat.md", out_dir / "summary.txt"
    with atomic.replacing(paths["md"], text=True) as fh:
        fh.writelines(line + "\n" for line in markdown(report.site, report.judged[0],
                                                       report.cases))
    paths["summary"].write_text(summary_text(report.site), encoding="utf-8")
    return paths

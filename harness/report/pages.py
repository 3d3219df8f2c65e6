"""The site format: the pages, compat.md and summary.txt (``site.render``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core import atomic
from harness.records.store import warn_damaged
from harness.report.data import Report, heatmap, long_columns
from harness.report.site import history_page
from harness.report.site.render import LONG_COLUMNS, markdown, render_site, summary_text


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """The pages, compat.md (put in its place whole) and summary.txt."""
    cells = report.cells
    columns = long_columns(cells.rows, cells.links, LONG_COLUMNS)
    warn_damaged([d for s in report.stores for d in s.damaged])  # found as the cells were read
    long_rows = list(zip(*(columns[c] for c in LONG_COLUMNS), strict=True))
    history = history_page.load(cells.rows, report.site, report.earlier, out_dir,
                                [s.run_id for s in report.stores])
    paths = render_site(report.site, out_dir, long_rows, heatmap(columns), history)
    paths["md"], paths["summary"] = out_dir / "compat.md", out_dir / "summary.txt"
    against = "\n".join(report.judged[0])
    with atomic.replacing(paths["md"], text=True) as fh:
        fh.writelines(line + "\n" for line in markdown(report.site))
        fh.write(f"\n## Against expectations\n\n```\n{against}\n```\n"
                 + _case_lines(report.cases) + "\n")
    paths["summary"].write_text(summary_text(report.site), encoding="utf-8")
    return paths


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

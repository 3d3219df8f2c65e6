"""The report's formats that come with the harness, each a writer (``report.writers``): it
takes the report's data (``data.Report``) and the folder, and returns the paths it wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core import atomic
from harness.core.results import CellResult
from harness.records.damaged import warn as warn_damaged
from harness.records.expect import Judgement
from harness.report.csvfile import write_csv
from harness.report.data import Report, heatmap, long_columns, summary_line
from harness.report.junit import write_junit
from harness.report.longjson import write_long_json
from harness.report.site import history_page
from harness.report.site.render import LONG_COLUMNS, markdown, render_site, summary_text


def junit(report: Report, out_dir: Path) -> dict[str, Path]:
    path = out_dir / "junit.xml"
    write_junit(report.cells().rows, f"ml-compat-harness {report.name}", path, report.keys)
    return {"junit": path}


def csv(report: Report, out_dir: Path) -> dict[str, Path]:
    path = out_dir / "compat.csv"
    write_csv(path, report.columns)
    return {"csv": path}


def long_json(report: Report, out_dir: Path) -> dict[str, Path]:
    """compat.json: the long table, what changed, and the cells judged against expectations."""
    path = out_dir / "compat.json"
    write_long_json(path, {
        "run_id": report.name, "runs": [s.run_id for s in report.stores],
        "summary": summary_line(report.columns), "cases": report.cases}, report.cells().rows, {
        "changes": report.changes(), "since": report.since,
        "expectations": [_verdict(r, j) for r, j in report.judged[1]]})
    return {"json": path}


def site(report: Report, out_dir: Path) -> dict[str, Path]:
    """The pages, their markdown twin (compat.md, written whole, then put in its place: a
    reader never sees half of it) and summary.txt (what ``harness report`` prints)."""
    columns = long_columns(report.cells().rows, report.cells().links, LONG_COLUMNS)
    warn_damaged([d for s in report.stores for d in s.damaged])  # found as the cells were read
    long_rows = list(zip(*(columns[c] for c in LONG_COLUMNS), strict=True))
    history = history_page.load(report.cells().rows, report.site, report.stores[0].run_dir,
                                out_dir, [s.run_id for s in report.stores])
    paths = render_site(report.site, out_dir, long_rows, heatmap(columns), history)
    paths["md"], paths["summary"] = out_dir / "compat.md", out_dir / "summary.txt"
    against = "\n".join(report.judged[0])
    with atomic.replacing(paths["md"], text=True) as fh:
        fh.writelines(line + "\n" for line in markdown(report.site))
        fh.write(f"\n## Against expectations\n\n```\n{against}\n```\n"
                 + _case_lines(report.cases) + "\n")
    paths["summary"].write_text(summary_text(report.site), encoding="utf-8")
    return paths


def _verdict(result: CellResult, judged: Judgement) -> dict[str, Any]:
    """A deviation from what was expected, or a failure that was (with why)."""
    return {"environment": result.environment,
            "case": f"{result.case_id}::{result.variant}",
            "hardware": result.hardware_target, "outcome": str(result.outcome),
            "expected": sorted(str(o) for o in judged.expected), "status": judged.status,
            "why": judged.why}



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


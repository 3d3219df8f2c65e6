"""The compatibility table: one row per environment, one column per case variant.

The only module that imports pandas.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness.results import CellResult, Outcome
from harness.store import RunStore

SYMBOLS = {
    Outcome.PASS: "✅", Outcome.REPRODUCED: "🐞", Outcome.FAIL: "❌", Outcome.SKIP: "⏭️",
    Outcome.ERROR: "⚠️", Outcome.TIMEOUT: "⏱️", Outcome.CRASH: "💥", Outcome.NOT_RUN: "·",
}
MEANING = {
    Outcome.PASS: "works here (a repro that passes: this environment is not affected)",
    Outcome.REPRODUCED: "the documented failure happened (its signature matched)",
    Outcome.FAIL: "failed with some other error",
    Outcome.SKIP: "a requirement is unmet here (reason in the JSON/CSV)",
    Outcome.ERROR: "environment or harness problem (build failure, drift)",
    Outcome.TIMEOUT: "no result within the timeout",
    Outcome.CRASH: "the process died (signal, abort, os._exit)",
    Outcome.NOT_RUN: "its hardware is not on this machine",
}
KEY_VERSIONS = ("torch", "numpy", "transformers", "transformer-engine", "flash-attn")


def results_frame(results: list[CellResult]) -> pd.DataFrame:
    rows = []
    for r in results:
        key = r.fingerprint.get("key", {}) if r.fingerprint else {}
        torch = (r.fingerprint or {}).get("torch") or {}
        rows.append({
            "environment": r.environment, "hardware": r.hardware_target,
            "column": f"{r.case_id}::{r.variant}", "outcome": str(r.outcome),
            "signature": r.signature or "", "reason": r.reason, "duration": r.duration,
            "caveat": str(r.details.get("caveat", "")),
            "cell_id": r.cell_id, "python": (r.fingerprint or {}).get("python") or "",
            "cuda": torch.get("cuda") or ("cpu" if torch else ""),
            **{f"v:{k}": key.get(k, "") for k in KEY_VERSIONS},
            **{f"axis:{k}": v for k, v in r.values.items()},
        })
    return pd.DataFrame(rows)


def compat_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Pivot to environments × case variants of outcome names, with key versions in front."""
    if frame.empty:
        return pd.DataFrame()
    frame = frame.assign(row=frame["environment"] + " @" + frame["hardware"])
    table = frame.pivot_table(index="row", columns="column", values="outcome",
                              aggfunc="first", sort=False)
    version_cols = ["python", "cuda", *[f"v:{k}" for k in KEY_VERSIONS]]
    versions = (frame.sort_values("python", ascending=False).groupby("row", sort=False)
                [version_cols].first())
    versions = versions.loc[:, (versions != "").any()]
    versions.columns = [c.removeprefix("v:") for c in versions.columns]
    table = table[sorted(table.columns)]  # repro before workaround, stable across runs
    out = versions.join(table).reindex(table.index)
    out.index.name = "environment"
    return out.fillna("")


def summary_line(frame: pd.DataFrame) -> str:
    counts = frame["outcome"].value_counts() if not frame.empty else pd.Series(dtype=int)
    parts = [f"{int(counts[o])} {o}" for o in (str(x) for x in Outcome) if o in counts]
    envs = frame["environment"].nunique() if not frame.empty else 0
    return f"{len(frame)} cells in {envs} environments: " + (", ".join(parts) or "nothing run")


def _symbolize(table: pd.DataFrame, case_columns: list[str],
               caveats: pd.DataFrame) -> pd.DataFrame:
    """Outcome names with their symbol; a cell whose case recorded a caveat gets a dagger."""
    out = table.copy()
    for col in case_columns:
        out[col] = out[col].map(lambda v: f"{SYMBOLS[Outcome(v)]} {v}" if v else "")
    for _, row in caveats.iterrows():
        out.loc[row["row"], row["column"]] += " †"
    return out


def _caveats(frame: pd.DataFrame) -> pd.DataFrame:
    """Cells whose result carries a caveat (a workaround that "passes" by turning FP8 off)."""
    if frame.empty:
        return frame
    marked = frame[frame["caveat"] != ""]
    return marked.assign(row=marked["environment"] + " @" + marked["hardware"])


def _caveat_lines(caveats: pd.DataFrame) -> str:
    lines = [f"- † {r['row']}, {r['column']}: {r['caveat']}" for _, r in caveats.iterrows()]
    return "\n\n## Caveats\n\n" + "\n".join(lines) if lines else ""


def _legend() -> str:
    return "\n".join(f"- {SYMBOLS[o]} **{o}**: {MEANING[o]}" for o in Outcome)


def write_report(store: RunStore, out_dir: Path) -> dict[str, Path]:
    results = store.results()
    frame = results_frame(results)
    table = compat_table(frame)
    case_columns = sorted(set(frame["column"])) if not frame.empty else []
    caveats = _caveats(frame)
    shown = _symbolize(table, case_columns, caveats) if not table.empty else table
    summary = summary_line(frame)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"compat.{ext}" for ext in ("md", "csv", "json", "html")}
    head = f"# Compatibility table\n\nRun `{store.run_id}`. {summary}.\n\n"
    body = shown.to_markdown() if not shown.empty else "_No results._"
    paths["md"].write_text(head + body + _caveat_lines(caveats) + "\n\n## Legend\n\n"
                           + _legend() + "\n", encoding="utf-8")
    frame.to_csv(paths["csv"], index=False)
    paths["json"].write_text(json.dumps({
        "run_id": store.run_id, "summary": summary,
        "table": json.loads(table.to_json(orient="index")) if not table.empty else {},
        "results": [r.to_dict() for r in results],
    }, indent=1, default=str), encoding="utf-8")
    paths["html"].write_text(_html(store.run_id, summary, shown, caveats), encoding="utf-8")
    return paths


def _html(run_id: str, summary: str, shown: pd.DataFrame, caveats: pd.DataFrame) -> str:
    table = shown.to_html(classes="compat", escape=True, border=0) if not shown.empty else (
        "<p>No results.</p>")
    notes = "".join(f"<li>† {html.escape(r['row'])}, {html.escape(r['column'])}: "
                    f"{html.escape(r['caveat'])}</li>" for _, r in caveats.iterrows())
    notes = f"<h2>Caveats</h2><ul id=\"caveats\">{notes}</ul>" if notes else ""
    legend = "".join(f"<li>{SYMBOLS[o]} <b>{o}</b>: {html.escape(MEANING[o])}</li>"
                     for o in Outcome)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Compatibility table {html.escape(run_id)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; }}
table.compat {{ border-collapse: collapse; font-size: 0.85rem; }}
table.compat th, table.compat td {{ border: 1px solid #ccc; padding: 0.25rem 0.5rem; }}
table.compat thead th {{ background: #f3f3f3; position: sticky; top: 0; }}
</style></head><body>
<h1>Compatibility table</h1>
<p id="summary">Run <code>{html.escape(run_id)}</code>. {html.escape(summary)}.</p>
{table}
{notes}
<h2>Legend</h2><ul>{legend}</ul>
</body></html>
"""


def diff_runs(old: list[CellResult], new: list[CellResult]) -> list[dict[str, Any]]:
    """Cells whose outcome changed between two runs (new failures first), by cell id."""
    before = {r.cell_id: r for r in old}
    changes = []
    for r in new:
        prev = before.get(r.cell_id)
        if prev is not None and prev.outcome != r.outcome:
            changes.append({"cell_id": r.cell_id, "environment": r.environment,
                            "case": f"{r.case_id}::{r.variant}", "hardware": r.hardware_target,
                            "before": str(prev.outcome), "after": str(r.outcome)})
    changes.sort(key=lambda c: (Outcome(c["after"]).ok, c["environment"], c["case"]))
    return changes

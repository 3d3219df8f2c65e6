"""The compatibility table: one row per environment, one column per case variant.

Pure functions over one or more run records (several shards of one run, or a run folder
copied from another machine). The only module that imports pandas.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.expect import Baseline, Verdict, judge_runs, summary_lines
from harness.junit import write_junit
from harness.merge import choose_records
from harness.results import CellResult, Outcome
from harness.store import RunStore

SYMBOLS = {
    Outcome.PASS: "✅", Outcome.REPRODUCED: "🐞", Outcome.FAIL: "❌", Outcome.SKIP: "⏭️",
    Outcome.ERROR: "⚠️", Outcome.TIMEOUT: "⏱️", Outcome.CRASH: "💥", Outcome.NOT_RUN: "·",
    Outcome.MISSING: "❔", Outcome.FLAKY: "🎲",
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
    Outcome.MISSING: "planned, but the shard that should have run it never reported",
    Outcome.FLAKY: "failed, then passed when tried again (the reason says how it failed)",
}
KEY_VERSIONS = ("torch", "numpy", "transformers", "transformer-engine", "flash-attn")


def merged_results(stores: Sequence[RunStore]) -> list[tuple[RunStore, CellResult]]:
    """Every cell once across the records, chosen as ``harness merge`` chooses."""
    return list(choose_records(stores)[0].values())


def results_frame(results: list[CellResult],
                  logs: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per cell. ``logs``: cell id -> the log's link from where the report goes."""
    rows = []
    for r in results:
        key = r.fingerprint.get("key", {}) if r.fingerprint else {}
        torch = (r.fingerprint or {}).get("torch") or {}
        rows.append({
            "environment": r.environment, "hardware": r.hardware_target,
            "column": f"{r.case_id}::{r.variant}", "outcome": str(r.outcome),
            "signature": r.signature or "", "reason": r.reason, "duration": r.duration,
            # Records before format 2 kept the caveat among the details.
            "caveat": r.caveat or str(r.details.get("caveat", "")),
            "cell_id": r.cell_id, "attempt": r.attempt, "node": r.node,
            "log": (logs or {}).get(r.cell_id, ""),
            "python": (r.fingerprint or {}).get("python") or "",
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


def write_report(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
                 baseline: Baseline | None = None) -> dict[str, Path]:
    stores = [stores] if isinstance(stores, RunStore) else list(stores)
    pairs = merged_results(stores)
    verdicts = judge_runs(stores, baseline)
    results = [r for _, r in pairs]
    logs = {r.cell_id: _link(store, r, out_dir) for store, r in pairs}
    frame = results_frame(results, logs)
    table = compat_table(frame)
    case_columns = sorted(set(frame["column"])) if not frame.empty else []
    caveats = _caveats(frame)
    shown = _symbolize(table, case_columns, caveats) if not table.empty else table
    summary = summary_line(frame)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"compat.{ext}" for ext in ("md", "csv", "json", "html")}
    run_ids = ", ".join(s.run_id for s in stores)
    cases = _case_metadata(stores)
    head = f"# Compatibility table\n\nRun `{run_ids}`. {summary}.\n\n"
    body = shown.to_markdown() if not shown.empty else "_No results._"
    against = "\n".join(summary_lines(verdicts, limit=200))
    paths["md"].write_text(head + body + _caveat_lines(caveats)
                           + f"\n\n## Against expectations\n\n```\n{against}\n```"
                           + _case_lines(cases)
                           + "\n\n## Legend\n\n" + _legend() + "\n", encoding="utf-8")
    frame.to_csv(paths["csv"], index=False)
    paths["json"].write_text(json.dumps({
        "run_id": run_ids, "runs": [s.run_id for s in stores], "summary": summary,
        "table": json.loads(table.to_json(orient="index")) if not table.empty else {},
        "cases": cases, "results": [r.to_dict() for r in results],
        "expectations": [_verdict(v) for v in verdicts
                         if v.deviates or (v.status == "expected" and not v.result.outcome.ok)],
    }, indent=1, default=str), encoding="utf-8")
    paths["html"].write_text(_html(run_ids, summary, shown, caveats, frame, cases),
                             encoding="utf-8")
    paths["junit"] = write_junit(results, f"ml-compat-harness {run_ids}",
                                 out_dir / "junit.xml")
    return paths


def _verdict(v: Verdict) -> dict[str, Any]:
    """A deviation from what was expected, or a failure that was (with why)."""
    return {"environment": v.result.environment,
            "case": f"{v.result.case_id}::{v.result.variant}",
            "hardware": v.result.hardware_target, "outcome": str(v.result.outcome),
            "expected": sorted(str(o) for o in v.expected), "status": v.status, "why": v.why}


def _link(store: RunStore, result: CellResult, out_dir: Path) -> str:
    """The log's path relative to the report, so the pair can move together."""
    path = store.log_file(result)
    if path is None or not path.is_file():
        return ""
    return os.path.relpath(path, out_dir.resolve())


def _case_metadata(stores: Sequence[RunStore]) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for store in stores:
        cases.update(store.cases)
    return dict(sorted(cases.items()))


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


def _html_table(shown: pd.DataFrame, frame: pd.DataFrame) -> str:
    """The table with each outcome linked to its cell's log."""
    if shown.empty:
        return "<p>No results.</p>"
    keyed = frame.assign(row=frame["environment"] + " @" + frame["hardware"])
    links = {(r["row"], r["column"]): r["log"] for _, r in keyed.iterrows() if r["log"]}
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    rows = []
    for index, row in shown.iterrows():
        cells = []
        for column, value in row.items():
            text = html.escape(str(value))
            link = links.get((str(index), str(column)))
            if link:
                text = f'<a href="{html.escape(link)}">{text}</a>'
            cells.append(f"<td>{text}</td>")
        rows.append(f"<tr><th>{html.escape(str(index))}</th>{''.join(cells)}</tr>")
    return (f'<table class="compat"><thead><tr><th>environment</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _html(run_id: str, summary: str, shown: pd.DataFrame, caveats: pd.DataFrame,
          frame: pd.DataFrame, cases: dict[str, Any]) -> str:
    table = _html_table(shown, frame)
    case_items = "".join(
        f"<li><b>{html.escape(m['case'])}::{html.escape(m['variant'])}</b>: "
        f"{html.escape(m.get('failure') or m.get('title') or '')} "
        + " ".join(f'<a href="{html.escape(u)}">{html.escape(u)}</a>'
                   for u in m.get("upstream", ())) + "</li>"
        for m in cases.values())
    cases_html = f"<h2>Cases</h2><ul id=\"cases\">{case_items}</ul>" if case_items else ""
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
{cases_html}
<h2>Legend</h2><ul>{legend}</ul>
</body></html>
"""


def diff_runs(old: list[CellResult], new: list[CellResult]) -> list[dict[str, Any]]:
    """What changed between two runs, cell by cell, matched by logical key (environment,
    ``case::variant``, hardware), not by content id, which a pin change renames.

    Classes: ``new failure`` (was fine, is not), ``fixed``, ``changed`` (fine both times but a
    different outcome: a documented failure that stopped reproducing is news), ``still
    failing`` (listed when its outcome or reason changed), ``new cell``, ``gone``, and
    ``versions changed`` (same outcome, different packages: the key versions or the freeze).
    New failures come first."""
    before = {r.logical_key: r for r in old}
    after = {r.logical_key: r for r in new}
    changes = []
    for key, now in after.items():
        was = before.get(key)
        if was is None:
            changes.append(_change("new cell", key, None, now))
            continue
        if was.outcome != now.outcome:
            kind = ("new failure" if was.outcome.ok and not now.outcome.ok else
                    "fixed" if not was.outcome.ok and now.outcome.ok else
                    "still failing" if not now.outcome.ok else "changed")
            changes.append(_change(kind, key, was, now))
        elif _versions(was) != _versions(now) and _versions(was) and _versions(now):
            changes.append(_change("versions changed", key, was, now))
    changes += [_change("gone", key, was, None) for key, was in before.items()
                if key not in after]
    order = {k: i for i, k in enumerate(("new failure", "fixed", "changed", "still failing",
                                         "versions changed", "new cell", "gone"))}
    changes.sort(key=lambda c: (order[c["class"]], c["environment"], c["case"],
                                c["hardware"]))
    return changes


def _versions(result: CellResult) -> dict[str, str]:
    fp = result.fingerprint or {}
    found = dict(fp.get("key") or {})
    if fp.get("freeze_sha256"):
        found["(freeze)"] = str(fp["freeze_sha256"])
    return found


def _change(kind: str, key: tuple[str, str, str], was: CellResult | None,
            now: CellResult | None) -> dict[str, Any]:
    either = now or was
    change: dict[str, Any] = {
        "class": kind, "environment": key[0], "case": key[1], "hardware": key[2],
        "before": str(was.outcome) if was else "", "after": str(now.outcome) if now else "",
        "cell_id": either.cell_id if either else ""}
    if was is not None and now is not None:
        old_v, new_v = _versions(was), _versions(now)
        change["versions"] = {name: f"{old_v.get(name, '-')} -> {new_v.get(name, '-')}"
                              for name in sorted(set(old_v) | set(new_v))
                              if old_v.get(name) != new_v.get(name) and name != "(freeze)"}
    return change

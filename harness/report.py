"""The report of one or more run records (several shards of one run, or a run folder copied
from another machine): the long-format data (CSV/JSON, one row per cell), the site and its
markdown (``harness.site``), JUnit, and what changed between two runs. The only module that
imports pandas.
"""

from __future__ import annotations

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


def summary_line(frame: pd.DataFrame) -> str:
    counts = frame["outcome"].value_counts() if not frame.empty else pd.Series(dtype=int)
    parts = [f"{int(counts[o])} {o}" for o in (str(x) for x in Outcome) if o in counts]
    envs = frame["environment"].nunique() if not frame.empty else 0
    return f"{len(frame)} cells in {envs} environments: " + (", ".join(parts) or "nothing run")


def write_report(stores: RunStore | Sequence[RunStore], out_dir: Path, *,
                 baseline: Baseline | None = None, previous: RunStore | None = None
                 ) -> dict[str, Path]:
    """Everything a reader gets, into ``out_dir``: the site (index, a page per documented
    failure, the capability grid, every cell), its markdown twin, the long-format CSV/JSON,
    JUnit and the heatmap. Cells come in matrix order, so the same results give the same
    bytes. ``previous``: the run to say what changed since."""
    from harness.site.model import build_site
    from harness.site.render import LONG_COLUMNS, markdown, render_site, summary_text

    stores = [stores] if isinstance(stores, RunStore) else list(stores)
    out_dir.mkdir(parents=True, exist_ok=True)
    metas = [s.meta for s in stores]
    pairs = _in_plan_order(merged_results(stores), stores)
    results = [r for _, r in pairs]
    bases = {id(s): os.path.relpath(s.run_dir, out_dir.resolve()) for s in stores}
    logs = {r.cell_id: _link(store, r, bases[id(store)]) for store, r in pairs}
    verdicts = judge_runs(stores, baseline, results)
    frame = results_frame(results, logs)
    summary = summary_line(frame)
    cases = _case_metadata(stores)
    environments: dict[str, Any] = {}
    for meta in metas:
        environments.update(meta.get("environments") or {})
    changes = diff_runs(previous.results(), results) if previous is not None else []
    site = build_site(results, environments, cases, metas, logs, changes,
                      previous.run_id if previous is not None else None)
    long_rows = (frame.reindex(columns=list(LONG_COLUMNS)).fillna("").astype(str)
                 .itertuples(index=False, name=None)) if not frame.empty else []
    paths = render_site(site, out_dir, list(long_rows), _heatmap(frame))
    against = "\n".join(summary_lines(verdicts, limit=200))
    paths["md"] = out_dir / "compat.md"
    paths["md"].write_text(markdown(site) + f"\n## Against expectations\n\n```\n{against}\n```\n"
                           + _case_lines(cases) + "\n", encoding="utf-8")
    paths["summary"] = out_dir / "summary.txt"  # what `harness report` prints
    paths["summary"].write_text(summary_text(site), encoding="utf-8")
    paths["csv"] = out_dir / "compat.csv"
    frame.to_csv(paths["csv"], index=False)
    paths["json"] = out_dir / "compat.json"
    paths["json"].write_text(json.dumps({
        "run_id": ", ".join(s.run_id for s in stores), "runs": [s.run_id for s in stores],
        "summary": summary, "cases": cases, **_long_records(results),
        "changes": changes, "since": previous.run_id if previous is not None else None,
        "expectations": [_verdict(v) for v in verdicts
                         if v.deviates or (v.status == "expected" and not v.result.outcome.ok)],
    }, default=str), encoding="utf-8")  # compact: json's C encoder (indent= is pure Python)
    if len(stores) == 1:  # the index `harness history` reads instead of the whole record
        from harness.history import write_index

        write_index(stores[0].run_dir, {r.logical_key: r.outcome for r in results})
    paths["junit"] = write_junit(results, "ml-compat-harness " + ", ".join(
        s.run_id for s in stores), out_dir / "junit.xml")
    return paths


def _long_records(results: Sequence[CellResult]) -> dict[str, Any]:
    """Each result once, with what it shares stored once: the environment's fingerprint by
    environment key, the machine by node. A cell whose fingerprint or machine differs from its
    group's keeps its own (nothing is dropped)."""
    fingerprints: dict[str, Any] = {}
    machines: dict[str, Any] = {}
    rows = []
    for r in results:
        row = r.to_dict()
        for field, shared, key in (("fingerprint", fingerprints, r.env_key),
                                   ("hardware", machines, r.node)):
            value = row.pop(field)
            if not value:
                continue
            if shared.setdefault(key, value) != value:
                row[field] = value
        rows.append(row)
    return {"fingerprints": fingerprints, "machines": machines, "results": rows}


def _in_plan_order(pairs: list[tuple[RunStore, CellResult]], stores: Sequence[RunStore]
                   ) -> list[tuple[RunStore, CellResult]]:
    """Matrix order (the plan's), not completion order: two renders of one run are equal."""
    order: dict[str, int] = {}
    for store in stores:
        for cell in store.planned():
            order.setdefault(cell["cell_id"], len(order))
    return sorted(pairs, key=lambda p: (order.get(p[1].cell_id, len(order)),
                                        p[1].logical_key, p[1].cell_id))


def _heatmap(frame: pd.DataFrame) -> list[list[Outcome | None]]:
    """Rows: environment @ hardware, columns: case variants, in the frame's order."""
    if frame.empty:
        return []
    rows = list(dict.fromkeys(frame["environment"] + " @" + frame["hardware"]))
    columns = sorted(set(frame["column"]))
    where = {(e + " @" + h, c): o for e, h, c, o in
             frame[["environment", "hardware", "column", "outcome"]].itertuples(index=False)}
    return [[Outcome(where[(r, c)]) if (r, c) in where else None for c in columns]
            for r in rows]


def _verdict(v: Verdict) -> dict[str, Any]:
    """A deviation from what was expected, or a failure that was (with why)."""
    return {"environment": v.result.environment,
            "case": f"{v.result.case_id}::{v.result.variant}",
            "hardware": v.result.hardware_target, "outcome": str(v.result.outcome),
            "expected": sorted(str(o) for o in v.expected), "status": v.status, "why": v.why}


def _link(store: RunStore, result: CellResult, base: str) -> str:
    """The log's path relative to the report (``base``: the run folder from there), so the
    pair can move together."""
    log = result.log
    if not log:
        return ""
    if Path(log).is_absolute():  # records before format 2
        return os.path.relpath(log, store.run_dir / base) if Path(log).is_file() else ""
    # os.path on strings: a pathlib object per link costs more than the rest of a fleet's
    # report's links.
    return f"{base}/{log}" if os.path.isfile(f"{store.run_dir}/{log}") else ""  # noqa: PTH113


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

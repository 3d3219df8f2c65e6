"""What a CI job shows: a short summary for ``$GITHUB_STEP_SUMMARY`` and one-line annotations
for the cells that newly fail, against the run before this one."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from harness.core.results import CellResult, Outcome
from harness.records.expect import how_many


def step_summary(run_id: str, results: Sequence[CellResult],
                 changes: Sequence[dict[str, Any]], since: str | None,
                 releases: Sequence[tuple[str, str]] = (),
                 pins: Mapping[str, Collection[tuple[str, str]]] | None = None) -> str:
    """``releases``: (distribution, version) new since the run before, each with how the cells
    whose environment pins it (``pins``) did."""
    counts = Counter(str(r.outcome) for r in results)
    order = [str(o) for o in Outcome if str(o) in counts]
    lines = [f"### Compatibility matrix `{run_id}`", "",
             "| " + " | ".join(order) + " |", "|" + "---|" * len(order),
             "| " + " | ".join(str(counts[o]) for o in order) + " |", ""]
    if since:
        new = [c for c in changes if c["class"] == "new failure"]
        fixed = [c for c in changes if c["class"] == "fixed"]
        lines.append(f"Since `{since}`: {how_many(len(new), 'new failure')}, {len(fixed)} fixed.")
        for dist, version in releases:
            mine = [r for r in results if (dist, version) in (pins or {}).get(r.environment, ())]
            failing = sum(not r.outcome.ok for r in mine)
            lines.append(f"- new: {dist} {version} — {failing} of {len(mine)} cells fail")
        for title, group in (("New failures", new), ("Fixed", fixed)):
            if group:
                lines += ["", f"**{title}**", ""]
                lines += [f"- {c['environment']} `{c['case']}` @{c['hardware']}: "
                          f"{c['before']} → {c['after']}" for c in group[:50]]
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY",
                                                     "GITHUB_RUN_ID"))
    if server and repo and run:
        lines += ["", "Full table: the `compatibility-table` artifact of "
                  f"[this run]({server}/{repo}/actions/runs/{run})."]
    return "\n".join(lines) + "\n"


def status_badge(results: Sequence[CellResult], changes: Sequence[dict[str, Any]],
                 since: str | None) -> dict[str, Any]:
    """A README badge (shields.io's endpoint): cells that work, and new failures (red)."""
    counts = Counter(r.outcome for r in results)
    works = counts[Outcome.PASS] + counts[Outcome.REPRODUCED]
    ran = sum(n for o, n in counts.items() if o not in (Outcome.NOT_RUN, Outcome.MISSING))
    new = sum(c["class"] == "new failure" for c in changes) if since else 0
    missing = counts[Outcome.MISSING]  # a shard that never reported: a hole, never green
    message = (f"{works}/{ran} as documented" + (f", {missing} MISSING" if missing else "")
               + (f", {how_many(new, 'new failure')}" if new else ""))
    return {"schemaVersion": 1, "label": "compatibility", "message": message,
            "color": "red" if new else "green" if works == ran and not missing else "yellow"}


def failure_annotations(changes: Sequence[dict[str, Any]]) -> Iterator[str]:
    """GitHub workflow commands: an error per new failure (one line each)."""
    for c in changes:
        if c["class"] == "new failure":
            text = (f"{c['environment']} {c['case']} @{c['hardware']}: {c['before']} -> "
                    f"{c['after']}").replace("%", "%25").replace("\n", " ")
            yield f"::error title=New failure::{text}"

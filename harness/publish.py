"""A run's report published: written into the run's folder against the run before it,
``reports/latest`` pointed at it, and under CI the step summary and the status badge."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.core import atomic
from harness.core.results import CellResult, counted
from harness.records import table
from harness.records.compare import bumped, new_releases, pinned_releases
from harness.records.store import RunStore, previous_run
from harness.report.build import diff_runs, prepare, write
from harness.report.ci import failure_annotations, status_badge, step_summary


def publish_report(store: RunStore, reports_dir: Path, *, baseline: Any = None,
                   previous: RunStore | None = None) -> dict[str, Path]:
    """The run's report into ``<run>/report``, against ``previous`` (default: the run before
    it); ``reports/latest`` points at it if the run covers the whole matrix."""
    out = store.run_dir / "report"
    report = prepare([store], out, baseline=baseline, previous=previous, since_in=reports_dir)
    paths = write(report, out)
    meta = report.metas[0]
    if not meta.get("shard") and not any((meta.get("filters") or {}).values()):
        point_latest(reports_dir, out)
    return paths


def point_latest(reports_dir: Path, target: Path) -> None:
    """``reports/latest`` -> the newest full report (a relative link, replaced atomically)."""
    link = reports_dir / "latest"
    reports_dir.mkdir(parents=True, exist_ok=True)
    atomic.point_link(link, os.path.relpath(target.resolve(), reports_dir.resolve()))


def publish_ci(store: RunStore, reports_dir: Path) -> None:
    """Under CI: the step summary and the new-failure annotations, against the run before."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    actions = os.environ.get("GITHUB_ACTIONS") == "true"
    if not (target or actions):
        return
    before, results, changes = _against_previous(store, reports_dir)
    if target:
        releases = new_releases(store.meta, before.meta) if before else []
        text = step_summary(store.run_id, counted(results), changes,
                            before.run_id if before else None, releases,
                            pinned_releases(store.meta.get("environments") or {}))
        try:
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:  # the run stands as it is: only its summary is lost
            print(f"harness: warning: GITHUB_STEP_SUMMARY={target}: {exc.strerror}; "
                  "no step summary written", file=sys.stderr)
    for line in failure_annotations(changes) if actions else ():
        print(line)


def write_status(store: RunStore, reports_dir: Path, path: Path) -> dict[str, Any]:
    """The badge JSON for ``store`` (``report.ci.status_badge``), against the run before."""
    before, results, changes = _against_previous(store, reports_dir)
    badge = status_badge(counted(results), changes, before.run_id if before else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(badge) + "\n")
    return badge


def _against_previous(store: RunStore, reports_dir: Path
                      ) -> tuple[RunStore | None, list[CellResult], list[dict[str, Any]]]:
    """The run before ``store`` (``records.store.previous_run``), ``store``'s results, and
    what changed since (a bump's cells against the cells it replaced)."""
    found = previous_run(reports_dir, store.run_dir)
    before = RunStore(found) if found else None
    mine = store.results()
    changes = (diff_runs(table.read(before.run_dir).rows(), mine,
                         bumped([store.meta])) if before else [])
    return before, mine, changes

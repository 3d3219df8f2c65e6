"""The one definition of run order: which run is the latest, and which came before another.

A run's place is when it was created (run.json ``created``), ties broken by its id: not a
file's mtime, which a copy, a restore from CI's cache or a re-render changes. ``--resume
latest``, ``--baseline latest``, a report's "what changed", history and CI all ask here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.core import jsonio
from harness.core.errors import UsageError
from harness.records.layout import KINDS, META, NIGHTLY, RESULTS


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    """A run folder's run.json, or None where there is no readable one."""
    try:
        meta = jsonio.loads((run_dir / META).read_bytes())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _created(meta: dict[str, Any] | None) -> float:
    """When a run was created, from its run.json (-1: not a readable run folder)."""
    try:
        return float(meta.get("created") or 0.0) if meta is not None else -1.0
    except (TypeError, ValueError):
        return -1.0


def run_order(run_dir: Path) -> tuple[float, str]:
    """A run's place among runs: its creation time, then its id (the tie-break)."""
    return _created(read_meta(run_dir)), run_dir.name


def ordered_runs(folder: Path, *, with_results: bool = False) -> list[Path]:
    """The run folders under ``folder`` (none if missing), oldest first; ``with_results``:
    only those that recorded a result."""
    return [path for path, _ in ordered_metas(folder, with_results=with_results)]


def ordered_metas(folder: Path, *, with_results: bool = False
                  ) -> list[tuple[Path, dict[str, Any]]]:
    """``ordered_runs``, each with its run.json (read once)."""
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        if with_results and not (path / RESULTS).is_file():
            continue
        meta = read_meta(path)
        when = _created(meta)
        if meta is not None and when >= 0:
            found.append(((when, path.name), path, meta))
    return [(p, m) for _, p, m in sorted(found, key=lambda f: f[0])]


def run_kind(meta: dict[str, Any] | None) -> str:
    """What a run was for (``layout.KINDS``); a record without a kind is a nightly."""
    kind = (meta or {}).get("kind")
    return kind if kind in KINDS else NIGHTLY


def lineage(meta: dict[str, Any] | None) -> tuple[str, str]:
    """The line of runs a run belongs to: its matrix file (normalised) and its kind."""
    matrix = (meta or {}).get("matrix")
    return (os.path.normpath(str(matrix)) if matrix else "", run_kind(meta))


def run_folders(folder: Path) -> list[Path]:
    """The run folders under ``folder``, oldest first (``harness history prune``'s input)."""
    return [path for path, _ in run_metas(folder)]


def run_metas(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """``run_folders``, each with its run.json (``harness history``'s input)."""
    if not folder.is_dir():
        raise UsageError(f"no folder of runs at {folder}")
    return ordered_metas(folder)


def latest_run(reports_dir: Path, line: tuple[str, str] | None = None) -> Path | None:
    """The newest run under ``reports_dir``; ``line``: of that matrix and kind (``lineage``)."""
    runs = [p for p, meta in ordered_metas(reports_dir / "runs")
            if line is None or lineage(meta) == line]
    return runs[-1] if runs else None


def newest_first(reports_dir: Path) -> Iterator[Path]:
    """Runs that recorded results, newest first (where earlier durations are looked up)."""
    yield from reversed(ordered_runs(reports_dir / "runs", with_results=True))


def previous_run(reports_dir: Path, current: Path) -> Path | None:
    """The newest nightly run of the same matrix created before ``current`` that covered the
    same slice (filters and shard); a bump (``--set``) is compared with the newest run of its
    slice without one, else the newest full run. Never a trial or a bump."""
    meta = read_meta(current)
    mine, scope = run_order(current), _scope(meta)
    here = current.resolve()
    line = (lineage(meta)[0], NIGHTLY)
    earlier = [(p, m) for p, m in ordered_metas(reports_dir / "runs", with_results=True)
               if p.resolve() != here and (_created(m), p.name) < mine and lineage(m) == line]
    wanted = [scope]
    if meta and meta.get("set"):
        wanted = [_scope({**meta, "set": {}}), _scope({})]
    scopes = {p: _scope(m) for p, m in earlier}
    for want in wanted:
        found = [p for p, _ in earlier if scopes[p] == want]
        if found:
            return found[-1]
    return None


def _scope(meta: dict[str, Any] | None) -> str:
    """What part of the matrix a run covered: its filters, shard and what --set replaced."""
    if meta is None:
        return "?"
    filters = {k: v for k, v in (meta.get("filters") or {}).items() if v}
    # Older records have no "set": the same scope as an empty one (dropped when empty).
    sets = meta.get("set") or {}
    return json.dumps([filters, meta.get("shard")] + ([sets] if sets else []), sort_keys=True)

"""Baselines: every cell's outcome in an earlier run, as what a later run is judged by
(``harness baseline RUN -o FILE``, or a run folder given as is)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import StoreError, UsageError
from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.store import RunStore, latest_run, lineage
from harness.records.table import Row

BASELINE_FORMAT = "ml-compat-harness baseline 1"
#: What a cell was that says nothing of what it should be.
SILENT = (Outcome.NOT_RUN, Outcome.MISSING)

Key = tuple[str, str, str]


@dataclass(frozen=True, kw_only=True)
class Baseline:
    source: str  # the run ids or file it came from
    outcomes: Mapping[Key, Outcome]


def baseline_from(results: Iterable[CellResult | Row], source: str) -> dict[str, Any]:
    """A baseline file's content: each cell that ran, by logical key, in a stable order."""
    cells = sorted(({"environment": r.environment, "case": f"{r.case_id}::{r.variant}",
                     "hardware": r.hardware_target, "outcome": str(r.outcome)}
                    for r in results if r.outcome not in SILENT),
                   key=lambda c: (c["environment"], c["case"], c["hardware"]))
    return {"format": BASELINE_FORMAT, "source": source, "cells": cells}


def resolve_baseline(text: str, reports_dir: Path, matrix: str | Path | None = None) -> Path:
    """The file or run folder ``--baseline`` names, fixed before a run adds a newer one (so
    ``latest`` stays the run before this one). ``matrix``: the matrix file of the run judged;
    ``latest`` is then the newest nightly run of it (never a bisect's trial or a bump)."""
    path = Path(text)
    if path.is_file():
        return path
    if text == "latest" and matrix:
        found = latest_run(reports_dir, lineage({"matrix": str(matrix)}))
        if found is None:
            raise UsageError(f"--baseline latest: no nightly run of {matrix} under "
                             f"{reports_dir / 'runs'}")
        return found.resolve()
    try:
        return RunStore.open(reports_dir, text).run_dir
    except StoreError:
        raise UsageError(f"--baseline {text}: neither a baseline file nor a run (an id under "
                         f"{reports_dir / 'runs'}, a run folder, latest)") from None


def load_baseline(path: Path, reports_dir: Path) -> Baseline:
    """A baseline file, or a run (id, folder, ``latest``) whose outcomes are the baseline."""
    if path.is_file():
        return _baseline_file(path)
    run_dir = resolve_baseline(str(path), reports_dir)
    # each cell's last attempt, as the record's reading gives
    return Baseline(source=run_dir.name,
                    outcomes=table.read(run_dir, table.OUTCOMES).outcomes())


def _baseline_file(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: unreadable: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise UsageError(f"--baseline {path}: not a baseline file (write one with "
                         "`harness baseline RUN -o FILE`)")
    try:
        outcomes = {(c["environment"], c["case"], c["hardware"]): Outcome(c["outcome"])
                    for c in data["cells"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: a malformed cell: {exc}") from None
    return Baseline(source=str(data.get("source") or path.name), outcomes=outcomes)

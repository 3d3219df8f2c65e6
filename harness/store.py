"""Run directories: results appended as they happen, so kill -9 loses no finished cell."""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from harness.errors import StoreError
from harness.results import CellResult, Outcome

RESULTS = "results.jsonl"
META = "run.json"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class RunStore:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir.resolve()  # cells run with another cwd
        self.run_id = run_dir.name

    @classmethod
    def create(cls, reports_dir: Path, meta: dict[str, Any]) -> RunStore:
        store = cls(reports_dir / "runs" / new_run_id())
        for sub in ("logs", "events", "envs"):
            (store.run_dir / sub).mkdir(parents=True, exist_ok=True)
        store.write_json(META, {"run_id": store.run_id, "created": time.time(), **meta})
        return store

    @classmethod
    def open(cls, reports_dir: Path, run_id: str = "latest") -> RunStore:
        runs = reports_dir / "runs"
        if run_id == "latest":
            found = sorted(p.name for p in runs.glob("*") if (p / META).exists())
            if not found:
                raise StoreError(f"no runs under {runs}")
            run_id = found[-1]
        run_dir = runs / run_id
        if not (run_dir / META).exists():
            raise StoreError(f"no run {run_id!r} under {runs}")
        return cls(run_dir)

    @property
    def meta(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / META).read_text())
        return data

    def update_meta(self, **changes: Any) -> None:
        self.write_json(META, {**self.meta, **changes})

    def write_json(self, name: str, data: Any) -> None:
        """Atomic: a reader sees the old file or the new one, never half of one."""
        path = self.run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        tmp.replace(path)

    def append(self, result: CellResult) -> None:
        # One write() of one line on an O_APPEND descriptor, then fsync: a kill at any point
        # leaves either the whole line or a torn tail that reading skips.
        line = (json.dumps(result.to_dict(), default=str) + "\n").encode()
        fd = os.open(self.run_dir / RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def results(self) -> list[CellResult]:
        """Every finished cell, once (the last record of a cell wins)."""
        path = self.run_dir / RESULTS
        by_cell: dict[str, CellResult] = {}
        if not path.exists():
            return []
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    record = CellResult.from_dict(json.loads(raw))
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by a kill mid-write
                by_cell[record.cell_id] = record
        return list(by_cell.values())

    def done_cells(self) -> set[str]:
        """Cells that need no re-run on resume (NOT_RUN may run on other hardware)."""
        return {r.cell_id for r in self.results() if r.outcome is not Outcome.NOT_RUN}

    def log_path(self, cell_id: str) -> Path:
        return self.run_dir / "logs" / f"{cell_id}.log"

    def events_path(self, cell_id: str) -> Path:
        return self.run_dir / "events" / f"{cell_id}.jsonl"

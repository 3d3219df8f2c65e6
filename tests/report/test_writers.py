"""The report's formats by name: one registered is written with the others."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.core.results import CellResult, Outcome
from harness.records.store import RunStore
from harness.report import writers
from harness.report.build import write_report
from harness.report.data import Report


def record(tmp_path: Path) -> RunStore:
    store = RunStore.create(tmp_path / "reports", {"planned": []}, run_id="night")
    store.extend([CellResult(run_id="night", cell_id=f"uv:a/mk/{v}/cpu", environment="uv:a",
                             values={}, env_key="uv:a", backend="uv", case_id="mk", variant=v,
                             nodeid=f"t.py::{v}", hardware_target="cpu", outcome=o)
                  for v, o in (("repro", Outcome.REPRODUCED), ("fix", Outcome.PASS))])
    return store


def outcomes(report: Report, out_dir: Path) -> dict[str, Path]:
    """A format of the test's own: each cell's outcome by its logical key, as JSON."""
    path = out_dir / "outcomes.json"
    path.write_text(json.dumps({"::".join(r.logical_key): str(r.outcome)
                                for r in report.rows}))
    return {"outcomes": path}


def test_a_registered_writer_is_written_with_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "WRITERS", dict(writers.WRITERS))
    writers.register("outcomes", outcomes)
    paths = write_report(record(tmp_path), tmp_path / "out")
    assert paths["outcomes"] == tmp_path / "out" / "outcomes.json"
    assert json.loads(paths["outcomes"].read_text()) == {
        "uv:a::mk::repro::cpu": "REPRODUCED", "uv:a::mk::fix::cpu": "PASS"}
    assert paths["md"].is_file() and paths["json"].is_file()  # beside the others


def test_the_formats_that_come_with_the_harness_are_registered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "WRITERS", {
        name: w for name, w in writers.WRITERS.items() if name in ("junit", "csv", "json",
                                                                    "site")})
    paths = write_report(record(tmp_path), tmp_path / "out")
    assert {"junit", "csv", "json", "md", "summary", "index.html", "cells.html",
            "failure-mk.html", "heatmap"} <= set(paths)
    assert all(p.is_file() for p in paths.values())
    del writers.WRITERS["csv"]  # a format taken out is not written
    assert "csv" not in write_report(record(tmp_path / "again"), tmp_path / "out2")
    assert not (tmp_path / "out2" / "compat.csv").exists()


def test_the_formats_but_the_site_are_written_in_a_worker_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A registered format is written in a second process beside the site, from the report as
    it is here; its paths come back in the order of the formats, its error is raised here."""

    def pid(report: Report, out_dir: Path) -> dict[str, Path]:
        path = out_dir / "pid.txt"
        path.write_text(f"{os.getpid()} {len(report.rows)}")
        return {"pid": path}

    monkeypatch.setattr(writers, "WRITERS", dict(writers.WRITERS))
    writers.register("pid", pid)
    paths = write_report(record(tmp_path), tmp_path / "out")
    worker, cells = map(int, paths["pid"].read_text().split())
    assert worker != os.getpid() and cells == 2
    assert next(iter(paths)) == "junit" and list(paths)[-1] == "pid"

    def refused(report: Report, out_dir: Path) -> dict[str, Path]:
        raise UsageError("no such format")

    writers.register("pid", refused)
    with pytest.raises(UsageError, match="no such format"):
        write_report(record(tmp_path / "again"), tmp_path / "out2")

"""A run's events: one file for the run, a line per event naming its cell and attempt,
appended as results.jsonl is; a suite's tests, whose one event is their result, add none."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.redact import Redactor
from harness.core.results import CellResult, CellRun, Outcome
from harness.records.store import RunStore


def result(cell: str, outcome: Outcome = Outcome.PASS, **extra: object) -> CellResult:
    fields: dict[str, object] = {
        "run_id": "r", "cell_id": cell, "environment": "e", "values": {}, "env_key": "k",
        "backend": "host", "case_id": "case", "variant": cell, "nodeid": f"t.py::{cell}",
        "hardware_target": "cpu", "outcome": outcome}
    return CellResult(**{**fields, **extra})  # type: ignore[arg-type]


def test_events_go_to_one_file_for_the_run_each_line_naming_its_cell(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []},
                            redactor=Redactor(("hf_secret_token",)))
    session = {"event": "session", "pid": 7, "note": "token hf_secret_token"}
    store.record(CellRun(result=result("a", Outcome.FAIL), events=(
        session, {"event": "start", "nodeid": "t.py::a"},
        {"event": "finish", "nodeid": "t.py::a", "outcome": "FAIL"})))
    store.record(CellRun(result=result("a", Outcome.PASS, attempt=2), events=(session,)))
    store.record(CellRun(result=result("s"), children=(
        CellRun(result=result("s1", parent="s")), CellRun(result=result("s2", parent="s")))))
    store.sync()
    assert not (store.run_dir / "events").exists()  # no folder of a file per cell
    lines = [json.loads(x) for x in (store.run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["cell_id"], e["attempt"], e["event"]) for e in lines] == [
        ("a", 1, "session"), ("a", 1, "start"), ("a", 1, "finish"), ("a", 2, "session")]
    assert lines[0]["note"] == "token ***" and lines[0]["pid"] == 7
    assert [r.cell_id for r in store.attempts()] == ["a", "a", "s1", "s2", "s"]

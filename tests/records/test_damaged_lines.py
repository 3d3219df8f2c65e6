"""A record's damaged lines (issue 50): a copy of a real run whose results.jsonl was edited
by hand. Each reader (report, history, merge, resume) leaves such a line out, names it on
stderr (file, line, why) and counts it in the report's header: never a traceback, never a
silent drop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records.store import RunStore
from tests.conftest import DATA, ROOT, write_matrix


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real run (host backend, five cases), its folder."""
    tmp = tmp_path_factory.mktemp("damaged")
    m = write_matrix(tmp / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        "environments:\n  host: {backend: host, python: '@PY@'}\n"))
    done = harness(tmp / "r", "run", "-m", str(m), "-k", "test_behaviour.py::test_[fpro]*",
                   "--run-id", "base")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return tmp / "r" / "runs" / "base"


def harness(reports: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(reports), *args],
                          cwd=reports.parent, capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def damaged_copy(finished: Path, tmp: Path, edit: dict[str, object] | None) -> Path:
    """A copy of the run whose third line holds ``edit`` (None: a torn last line added);
    its reports folder."""
    run = tmp / "r" / "runs" / "copy"
    shutil.copytree(finished, run)
    (run / "cells.sqlite").unlink(missing_ok=True)
    shutil.rmtree(run / "report", ignore_errors=True)
    lines = (run / "results.jsonl").read_text().splitlines()
    if edit is None:
        text = "\n".join(lines) + "\n" + lines[2][:40]
    else:
        lines[2] = json.dumps({**json.loads(lines[2]), **edit})
        text = "\n".join(lines) + "\n"
    (run / "results.jsonl").write_text(text)
    return tmp / "r"


EDITS = [
    ("environment", {"environment": 7}),
    ("hardware_target", {"hardware_target": 7}),
    ("variant", {"variant": 7}),
    ("case_id", {"case_id": 7}),
    ("cell_id", {"cell_id": 7}),
    ("duration", {"duration": "1.5"}),
    ("outcome", {"outcome": "GREAT"}),
    ("torn", None),
]


@pytest.mark.parametrize(("field", "edit"), EDITS, ids=[e[0] for e in EDITS])
def test_report_history_and_merge_leave_a_damaged_line_out_and_say_so(
        finished: Path, tmp_path: Path, field: str, edit: dict[str, object] | None) -> None:
    reports = damaged_copy(finished, tmp_path, edit)
    line = 6 if edit is None else 3
    record = reports / "runs" / "copy" / "results.jsonl"
    named = f"harness: warning: {record}: line {line}: "
    cells = 5 if edit is None else 4
    for args in (["report", "copy"], ["history", "--all"], ["merge", "copy", "--run-id", "m"]):
        done = harness(reports, *args)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode in (0, 1), (args, done.stderr)
        warned = [w for w in done.stderr.splitlines() if w.startswith(named)]
        assert len(warned) == 1, (args, done.stderr)  # named once, with its field
        assert (field if edit is not None else "torn") in warned[0], warned
        if args[0] == "history":
            assert done.stdout.splitlines()[-1] == f"{cells} of {cells} cells shown", done.stdout
    for run in ("copy", "m"):  # the merge's report too (the cell MISSING there, as planned)
        header = (reports / "runs" / run / "report" / "summary.txt").read_text()
        assert "; 1 damaged line left out" in header, header
    header = (reports / "runs" / "copy" / "report" / "summary.txt").read_text()
    assert f" {cells} of {cells} cells ran (" in header, header


def test_a_torn_last_line_does_not_stop_a_resume(finished: Path, tmp_path: Path) -> None:
    """A run killed mid-write: its torn tail is named and left out, and the resumed run
    runs the cell again, its line whole (not glued to the torn one)."""
    reports = damaged_copy(finished, tmp_path, None)
    record = reports / "runs" / "copy" / "results.jsonl"
    lines = record.read_bytes().split(b"\n")
    record.write_bytes(b"\n".join(lines[:4]) + b"\n" + lines[4][:50])  # the fifth cell torn
    store = RunStore(record.parent)
    assert len(store.results()) == 4 and [d.line for d in store.damaged] == [5]
    matrix = finished.parents[2] / "matrix.yaml"
    done = harness(reports, "run", "-m", str(matrix), "-k", "test_behaviour.py::test_[fpro]*",
                   "--resume", "copy")
    assert "Traceback" not in done.stderr and "4 cells done, 1 to run" in done.stdout, (
        done.stdout + done.stderr)
    assert f"{record}: line 5: torn" in done.stderr
    assert len(RunStore(record.parent).results()) == 5
    header = (record.parent / "report" / "summary.txt").read_text()
    assert "5 of 5 cells ran (" in header and "; 1 damaged line left out" in header


def test_a_run_json_of_the_wrong_shape_is_one_line_and_breaks_no_other_run(
        finished: Path, tmp_path: Path) -> None:
    """A hand-edited run.json (``filters`` a list): reading that run is a one-line error
    naming the file and the field; a new run, and history, leave it out with a warning."""
    reports = damaged_copy(finished, tmp_path, {})
    meta = reports / "runs" / "copy" / "run.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "filters": ["a"]}))
    said = f"{meta}: filters: Expected `object | null`, got `array`"
    done = harness(reports, "report", "copy")
    assert done.returncode == 2 and done.stderr == f"harness: error: {said}\n", done.stderr
    matrix = finished.parents[2] / "matrix.yaml"
    for args in (["run", "-m", str(matrix), "-k", "test_behaviour.py::test_pass"], ["history"]):
        done = harness(reports, *args)
        assert done.returncode == 0, (args, done.stderr)
        warned = [line for line in done.stderr.splitlines() if said in line]  # said once
        assert warned == [f"harness: warning: {said}; the run is left out"], done.stderr

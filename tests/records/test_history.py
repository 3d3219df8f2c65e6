from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.core.results import CellResult, Outcome
from harness.records.history import load, prune
from harness.records.store import list_runs

P, F, R = Outcome.PASS, Outcome.FAIL, Outcome.REPRODUCED


def write_run(folder: Path, run_id: str, created: float,
              outcomes: dict[tuple[str, str], Outcome]) -> Path:
    run = folder / run_id
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": run_id, "created": created}))
    lines = []
    for (env, variant), outcome in outcomes.items():
        lines.append(json.dumps(CellResult(
            run_id=run_id, cell_id=f"{env}{variant}{run_id}", environment=env, values={},
            env_key="k", backend="uv", case_id="case", variant=variant, nodeid="n",
            hardware_target="cpu", outcome=outcome).to_dict()))
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_history_rows_follow_the_logical_key_and_flag_flips(tmp_path: Path) -> None:
    nights = [{("a", "steady"): P, ("a", "flip"): P, ("a", "fixed"): F, ("a", "repro"): R},
              {("a", "steady"): P, ("a", "flip"): F, ("a", "fixed"): F, ("a", "repro"): R},
              {("a", "steady"): P, ("a", "flip"): P, ("a", "fixed"): P, ("a", "repro"): P,
               ("a", "new"): P}]
    for i, outcomes in enumerate(nights):  # names sort against creation order on purpose
        write_run(tmp_path, f"z{9 - i}", 1000.0 + i, outcomes)
    (tmp_path / "not-a-run").mkdir()
    history = load(tmp_path, last=10)
    assert history.runs == ("z9", "z8", "z7")
    rows = {k[1]: v for k, v in history.rows(changed_only=True)}
    assert set(rows) == {"case::flip", "case::fixed", "case::repro"}
    assert rows["case::flip"] == (P, F, P) and history.flaky(rows["case::flip"])
    assert not history.flaky(rows["case::fixed"]) and history.flips(rows["case::fixed"]) == 1
    text = history.render(changed_only=False)
    assert "case::new" in text and "- - P" in text and "P F P  2 changes, flaky" in text
    assert text.splitlines()[-1] == "5 of 5 cells shown"
    assert load(tmp_path, last=1).runs == ("z7",)
    assert load(tmp_path, last=1).render(changed_only=True).startswith(f"1 run in {tmp_path},")
    data = history.to_dict(changed_only=True)
    assert [c["case"] for c in data["cells"]] == ["case::fixed", "case::flip", "case::repro"]


def test_prune_keeps_the_newest_runs(tmp_path: Path) -> None:
    for i in range(4):
        write_run(tmp_path, f"run{i}", 1000.0 + i, {("a", "x"): Outcome.PASS})
    removed = prune(tmp_path, keep=2)
    assert [p.name for p in removed] == ["run0", "run1"]
    assert [r.path.name for r in list_runs(tmp_path)] == ["run2", "run3"]
    with pytest.raises(UsageError, match="no folder of runs"):
        prune(tmp_path / "absent", keep=2)


def test_history_command(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    write_run(tmp_path / "r" / "runs", "n1", 1.0, {("a", "x"): Outcome.PASS})
    write_run(tmp_path / "r" / "runs", "n2", 2.0, {("a", "x"): Outcome.CRASH})
    proc = subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           "history", "--format", "json"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    (cell,) = json.loads(proc.stdout)["cells"]
    assert cell["outcomes"] == ["PASS", "CRASH"] and cell["changes"] == 1


def test_the_table_is_read_while_current_and_made_again_when_the_record_grows(
        tmp_path: Path) -> None:
    import sqlite3

    from harness.records.table import CELLS, OUTCOMES, read

    def run_outcomes(run: Path) -> dict[tuple[str, str, str], Outcome]:
        return read(run, OUTCOMES).outcomes()

    run = write_run(tmp_path, "n1", 1.0, {("a", "x"): P})
    assert run_outcomes(run) == {("a", "case::x", "cpu"): P}
    record = (run / "results.jsonl").stat()
    with sqlite3.connect(run / CELLS) as db:
        assert dict(db.execute("select name, value from meta"))["record_size"] == str(
            record.st_size)
        db.execute("update results set outcome = 'FAIL'")
        db.execute("update meta set value = 'F' where name = 'letters'")
    # the table is what is read, by history (its outcomes' letters) and by the rest
    assert run_outcomes(run) == {("a", "case::x", "cpu"): F}
    assert load(tmp_path, last=1).cells == {("a", "case::x", "cpu"): (F,)}
    write_run(tmp_path, "n2", 2.0, {("a", "x"): R})  # another record, appended to n1's file
    (run / "results.jsonl").write_text((run / "results.jsonl").read_text()
                                       + (tmp_path / "n2" / "results.jsonl").read_text())
    # Stale (the record grew): made again from the record. n2's line is another cell (another
    # cell id) of the same logical key, recorded last: it is the key's outcome.
    assert run_outcomes(run) == {("a", "case::x", "cpu"): R}


def test_a_run_whose_record_cannot_be_read_is_left_out_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A results.jsonl that is a folder (or a file this user may not read): history, and the
    report of a later run, go on without that run and say why."""
    write_run(tmp_path, "a", 1000.0, {("a", "x"): P})
    broken = write_run(tmp_path, "b", 1001.0, {("a", "x"): F})
    (broken / "results.jsonl").unlink()
    (broken / "results.jsonl").mkdir()
    write_run(tmp_path, "c", 1002.0, {("a", "x"): P})
    history = load(tmp_path, last=10)
    assert history.runs == ("a", "c") and history.cells[("a", "case::x", "cpu")] == (P, P)
    assert capsys.readouterr().err == (f"harness: warning: {broken / 'results.jsonl'}: "
                                       "unreadable: Is a directory; the run is left out\n")

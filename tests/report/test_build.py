"""What the report's build works out before any page: each cell's log link, what its
fingerprint says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.results import CellResult, Outcome
from harness.publish import publish_report
from harness.records import bisects, history, reportinput, table
from harness.records import store as run_store
from harness.records.store import RunStore
from harness.report import writers
from harness.report.build import _links, write_report
from tests.conftest import ROOT


def cell(cell_id: str, log: str | None) -> CellResult:
    return CellResult(run_id="r", cell_id=cell_id, environment="e", values={}, env_key="k",
                      backend="uv", case_id="c", variant="v", nodeid="n",
                      hardware_target="cpu", outcome=Outcome.PASS, log=log)


def test_each_log_is_linked_from_the_report_where_it_is_there(tmp_path: Path) -> None:
    """Relative to the report, so the two move together: a log in logs/ (listed once), one
    further down, one by its absolute path (records before format 2); "" for a log that is
    not there, and for none."""
    store = RunStore.create(tmp_path / "reports", {"planned": []}, run_id="r")
    (store.run_dir / "logs" / "a.log").write_text("a")
    (store.run_dir / "logs" / "sub").mkdir()
    (store.run_dir / "logs" / "sub" / "b.log").write_text("b")
    elsewhere = tmp_path / "old" / "c.log"
    elsewhere.parent.mkdir()
    elsewhere.write_text("c")
    cells = [cell("1", "logs/a.log"), cell("2", "logs/gone.log"), cell("3", "logs/sub/b.log"),
             cell("4", "logs/sub/gone.log"), cell("5", str(elsewhere)),
             cell("6", str(tmp_path / "old" / "gone.log")), cell("7", None), cell("8", "")]
    out = store.run_dir / "report"
    want = {"1": "../logs/a.log", "2": "", "3": "../logs/sub/b.log", "4": "",
            "5": "../../../../old/c.log", "6": "", "7": "", "8": ""}
    names = [store.log_names()]
    assert dict(zip(want, _links([(store, c) for c in cells], [store], names, out),
                    strict=True)) == want
    assert (out / want["5"]).resolve() == elsewhere.resolve()


def test_a_log_is_linked_in_the_run_of_its_cell(tmp_path: Path) -> None:
    """Several records (shards) reported together: one log name in two runs is two links,
    each made in its own run (present in one of them, not in the other), whatever the
    order of the cells."""
    one = RunStore.create(tmp_path / "reports", {"planned": []}, run_id="one")
    two = RunStore.create(tmp_path / "reports", {"planned": []}, run_id="two")
    (one.run_dir / "logs" / "batch.log").write_text("a")
    (two.run_dir / "logs" / "other.log").write_text("b")
    out = tmp_path / "reports" / "site"
    pairs = [(one, cell("1", "logs/batch.log")), (two, cell("2", "logs/batch.log")),
             (two, cell("3", "logs/other.log")), (one, cell("4", "logs/other.log")),
             (one, cell("5", "logs/batch.log"))]
    assert _links(pairs, [one, two], [one.log_names(), two.log_names()], out) == [
        "../runs/one/logs/batch.log", "", "../runs/two/logs/other.log", "",
        "../runs/one/logs/batch.log"]


def test_a_record_whose_fingerprints_are_no_mappings_is_reported(tmp_path: Path) -> None:
    """A hand edit's fingerprint (a number, a list, a ``key`` that is no mapping) says no
    versions: the report, its check, the baseline and history read the run (they failed on
    ``.get`` of it)."""
    store = RunStore.create(tmp_path, {"planned": []}, run_id="r")
    lines = []
    for i, fp in enumerate((5, [1], {"key": [1], "torch": "x"}, {"key": {"torch": "2.1"}})):
        row = CellResult(run_id="r", cell_id=f"c{i}", environment="e", values={}, env_key="k",
                         backend="uv", case_id="case", variant=f"v{i}", nodeid="n",
                         hardware_target="cpu", outcome=Outcome.PASS).to_dict()
        lines.append(json.dumps({**row, "fingerprint": fp}))
    (store.run_dir / "results.jsonl").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["report", "r", "--out", str(tmp_path / "out"), "--check"],
                 ["baseline", "r"], ["history", "--dir", str(tmp_path / "runs")]):
        proc = subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path),
                               *args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
    compat = json.loads((tmp_path / "out" / "compat.json").read_text())
    table = compat["results"]
    assert [r[table["columns"].index("cell_id")] for r in table["data"]] == [
        "c0", "c1", "c2", "c3"]


def test_a_published_report_reads_its_records_in_one_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``publish_report`` reads the store once (``records.reportinput.read``): the run before
    it, the cells, the plan, the logs, what changed, the history; any read of the records
    after that call fails. (The suite's own check reads the records apart: not here.)"""
    reports = tmp_path / "reports"
    for run_id, outcome in (("one", Outcome.PASS), ("two", Outcome.FAIL)):
        store = RunStore.create(reports, {"planned": [{"cell_id": "c1"}]}, run_id=run_id)
        store.extend([CellResult(run_id=run_id, cell_id="c1", environment="e", values={},
                                 env_key="k", backend="uv", case_id="case", variant="v",
                                 nodeid="n", hardware_target="cpu", outcome=outcome)])
        if run_id == "one":
            write_report(store, tmp_path / "first")  # its table, for "what changed"
    monkeypatch.setattr(writers, "WRITERS", {k: w for k, w in writers.WRITERS.items()
                                             if k != "check"})
    read = reportinput.read

    def once(*args: Any, **kwargs: Any) -> reportinput.ReportInput:
        got = read(*args, **kwargs)

        def again(*_: Any, **__: Any) -> None:
            pytest.fail("the report read its records a second time")

        for name in ("results", "attempts", "planned", "log_names", "as_of"):
            monkeypatch.setattr(RunStore, name, again)
        monkeypatch.setattr(RunStore, "meta", property(again))
        for module, names in ((table, ("read", "changed", "current", "stamp")),
                              (history, ("load",)), (run_store, ("previous_run", "read_meta")),
                              (bisects, ("read_bisects",))):
            for name in names:
                monkeypatch.setattr(module, name, again)
        return got

    monkeypatch.setattr(reportinput, "read", once)
    paths = publish_report(store, reports)
    assert "two" in paths["summary"].read_text() and "fixed" not in paths["summary"].read_text()
    assert "new failure: e case::v @cpu: PASS -> FAIL" in paths["summary"].read_text()

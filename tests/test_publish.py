"""harness/publish.py: a run's report published, and reports/latest pointed at it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.results import CellResult, Outcome
from harness.publish import point_latest, publish_ci
from harness.records.store import RunStore
from tests.conftest import imported

#: What the records' commands (merge, report, history, baseline) need and never use: the
#: run's own steps, its console, its executors and environments, the matrix's parser.
RUN_ONLY = ("rich", "harness.run.cell", "harness.run.dispatch", "harness.envs.base",
            "harness.matrix.load", "harness.planning", "harness.workflow")


def test_merge_report_and_history_import_nothing_of_a_run_step() -> None:
    """They publish a report without running anything: importing the run's steps cost them
    a tenth of a second each."""
    assert imported("harness.commands.records", RUN_ONLY) == []


def test_a_run_imports_what_they_do_not() -> None:
    """The check above can fail: ``harness run``'s module imports all of them."""
    assert imported("harness.commands.run", RUN_ONLY) == sorted(RUN_ONLY)


def test_latest_points_at_the_newest_full_report_by_a_relative_link(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    for run in ("one", "two"):
        (reports / "runs" / run / "report").mkdir(parents=True)
        point_latest(reports, reports / "runs" / run / "report")
    assert str((reports / "latest").readlink()) == "runs/two/report"
    assert (reports / "latest").resolve() == (reports / "runs" / "two" / "report").resolve()


def test_a_step_summary_that_cannot_be_written_is_a_warning_and_the_run_stands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``GITHUB_STEP_SUMMARY`` naming a folder or a path that is not there ended a merge that
    had written everything in a traceback (exit 1, its annotations never printed)."""
    store = RunStore.create(tmp_path / "reports", {"planned": []}, run_id="night")
    store.extend([CellResult(run_id="night", cell_id="c1", environment="host", values={},
                             env_key="k", backend="host", case_id="probes", variant="import",
                             nodeid="t.py::t", hardware_target="cpu", outcome=Outcome.PASS)])
    for target in (tmp_path, tmp_path / "absent" / "summary.md"):
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
        publish_ci(store, tmp_path / "reports")
        assert capsys.readouterr().err == (
            f"harness: warning: GITHUB_STEP_SUMMARY={target}: "
            f"{'Is a directory' if target == tmp_path else 'No such file or directory'}; "
            "no step summary written\n")


def test_the_step_summary_counts_a_suite_session_as_its_tests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the report's coverage line does: it counted the session's cell beside its tests
    (2 PASS, 2 FAIL where the report said 3 cells: 2 PASS, 1 FAIL)."""
    store = RunStore.create(tmp_path / "reports", {"planned": []}, run_id="night")

    def cell(cell_id: str, outcome: Outcome, parent: str = "") -> CellResult:
        return CellResult(run_id="night", cell_id=cell_id, environment="host", values={},
                          env_key="k", backend="host", case_id="mine", variant=cell_id,
                          nodeid="", hardware_target="cpu", outcome=outcome, parent=parent)

    store.extend([cell("s", Outcome.FAIL), cell("a", Outcome.PASS, "s"),
                  cell("b", Outcome.FAIL, "s"), cell("c", Outcome.PASS, "s")])
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    publish_ci(store, tmp_path / "reports")
    assert "| PASS | FAIL |\n|---|---|\n| 2 | 1 |\n" in (tmp_path / "summary.md").read_text()

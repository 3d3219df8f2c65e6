"""harness/publish.py: a run's report published, and reports/latest pointed at it."""

from __future__ import annotations

from pathlib import Path

from harness.publish import point_latest
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

"""harness/publish.py: a run's report published, and reports/latest pointed at it."""

from __future__ import annotations

from pathlib import Path

from harness.publish import point_latest


def test_latest_points_at_the_newest_full_report_by_a_relative_link(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    for run in ("one", "two"):
        (reports / "runs" / run / "report").mkdir(parents=True)
        point_latest(reports, reports / "runs" / run / "report")
    assert str((reports / "latest").readlink()) == "runs/two/report"
    assert (reports / "latest").resolve() == (reports / "runs" / "two" / "report").resolve()

"""harness/planning.py: what a run is asked, and the steps before any cell runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import SpecError
from harness.planning import RunOptions, RunState, load_spec
from tests.conftest import imported


def test_a_cases_folder_without_pytest_ini_is_a_matrix_error(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    matrix = tmp_path / "m.yaml"
    matrix.write_text("version: 1\ncases_dir: cases\nenvironments:\n  h: {backend: host}\n")
    with pytest.raises(SpecError, match="not a cases folder"):
        load_spec(RunState(options=RunOptions(matrix=matrix)))


#: What a run's later steps need and a plan never uses: the report's pages (jinja2 itself is
#: imported only where they are rendered), the live console, the run layer, the
#: environment backends.
HEAVY = ("harness.report.site.render", "rich", "harness.report.build", "harness.run.cell",
         "harness.run.dispatch", "harness.envs.base", "harness.workflow")


def test_plan_cases_and_doctor_import_nothing_of_a_run() -> None:
    """``harness plan``, ``cases`` and ``doctor`` end before any cell runs."""
    assert imported("harness.commands.plan", HEAVY) == []


def test_a_run_imports_them_all() -> None:
    """The check above can fail: ``harness run``'s module does import all of them."""
    assert imported("harness.commands.run", HEAVY) == sorted(HEAVY)

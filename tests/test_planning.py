"""harness/planning.py: what a run is asked, and the steps before any cell runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import SpecError
from harness.planning import RunOptions, RunState, load_spec

ROOT = Path(__file__).resolve().parent.parent


def test_a_cases_folder_without_pytest_ini_is_a_matrix_error(tmp_path: Path) -> None:
    (tmp_path / "cases").mkdir()
    matrix = tmp_path / "m.yaml"
    matrix.write_text("version: 1\ncases_dir: cases\nenvironments:\n  h: {backend: host}\n")
    with pytest.raises(SpecError, match="not a cases folder"):
        load_spec(RunState(options=RunOptions(matrix=matrix)))


#: What a run's later steps need and a plan never uses: the report's templates and pages,
#: the live console, the run layer, the environment backends.
HEAVY = ("jinja2", "rich", "harness.report.build", "harness.run.cell", "harness.run.dispatch",
         "harness.envs.base", "harness.workflow")


#: What the records' commands (merge, report, history, baseline) need and never use: the
#: run's own steps, its console, its executors and environments, the matrix's parser.
RUN_ONLY = ("rich", "harness.run.cell", "harness.run.dispatch", "harness.envs.base",
            "harness.matrix.load", "harness.planning", "harness.workflow")


def imported(module: str, names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` importing ``module`` brings in, in a fresh interpreter."""
    code = (f"import sys, json; import {module}; "
            f"print(json.dumps(sorted(m for m in {names!r} if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    found: list[str] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("module", ["plan", "machine"])
def test_plan_cases_and_doctor_import_nothing_of_a_run(module: str) -> None:
    """``harness plan``, ``cases`` and ``doctor`` end before any cell runs: importing the
    run's steps too cost them a fifth of a second of their half second."""
    assert imported(f"harness.commands.{module}", HEAVY) == []


def test_merge_report_and_history_import_nothing_of_a_run_step() -> None:
    assert imported("harness.commands.records", RUN_ONLY) == []


def test_a_run_imports_them_all() -> None:
    """The checks above can fail: ``harness run``'s module does import all of them."""
    assert imported("harness.commands.run", HEAVY) == sorted(HEAVY)
    assert imported("harness.commands.run", RUN_ONLY) == sorted(RUN_ONLY)

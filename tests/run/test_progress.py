"""What the terminal says while a run goes: NOT_RUN cells a line per environment × hardware."""

from __future__ import annotations

import pytest

from harness.core.results import CellResult, Outcome
from harness.run.progress import RunProgress


def result(env: str, outcome: Outcome, hardware: str = "sm_90", variant: str = "v",
           reason: str = "needs sm_90; GPUs here: none") -> CellResult:
    return CellResult(run_id="r", cell_id=f"{env}/{variant}/{hardware}", environment=env,
                      values={}, env_key="k", backend="uv", case_id="c", variant=variant,
                      nodeid="n", hardware_target=hardware, outcome=outcome, reason=reason)


def run(verbose: bool, capsys: pytest.CaptureFixture[str]) -> list[str]:
    cells = [result("gpu-a", Outcome.NOT_RUN, variant=str(i)) for i in range(3)]
    cells += [result("gpu-b", Outcome.NOT_RUN), result("gpu-b", Outcome.NOT_RUN, "sm_80"),
              result("cpu", Outcome.PASS, "cpu", reason="")]
    with RunProgress(len(cells), live=False, verbose=verbose) as progress:
        for cell in cells:
            progress.advance(cell)
    return capsys.readouterr().err.splitlines()


def test_cells_not_run_are_one_line_per_environment_and_hardware(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert run(False, capsys) == [
        "not run    gpu-a @sm_90 (3 cells)  needs sm_90; GPUs here: none",
        "not run    gpu-b @sm_90 (1 cell)  needs sm_90; GPUs here: none",
        "not run    gpu-b @sm_80 (1 cell)  needs sm_90; GPUs here: none",
        "[6/6] PASS       cpu c::v @cpu"]


def test_verbose_says_every_cell(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run(True, capsys)
    assert len(lines) == 6 and lines[0].startswith("[1/6] NOT_RUN    gpu-a c::0 @sm_90")

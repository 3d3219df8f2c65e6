"""Every matrix kept in the repository parses and plans (the GPU-host one too, where it
cannot run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.matrix.load import load_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import make_plan
from tests.conftest import ROOT

MATRICES = [ROOT / "matrix.yaml", *sorted((ROOT / "matrices").glob("*.yaml"))]


@pytest.mark.parametrize("path", MATRICES, ids=lambda p: p.name)
def test_a_matrix_in_the_repository_plans(path: Path) -> None:
    spec = load_matrix(path)
    plan = make_plan(spec, collect_cases(spec.cases_dir.resolve()), ("cpu", "sm_90"))
    assert plan.cells and {c.case.case_id for c in plan.cells}


def test_the_gpu_host_matrix_is_overlays_on_the_host() -> None:
    spec = load_matrix(ROOT / "matrices" / "gpu-host.yaml")
    assert {e.base for e in spec.environments} == {"host"}
    assert not any(r.startswith("torch") for e in spec.environments for r in e.requirements)

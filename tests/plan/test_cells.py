from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.matrix.load import load_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import cell_id, filter_plan, json_lines, make_plan
from tests.conftest import ROOT


def plan_json() -> list[dict[str, object]]:
    out = subprocess.run([sys.executable, "-m", "harness", "plan", "--format", "json"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def test_default_matrix_cell_ids_are_stable_and_unique() -> None:
    first, second = plan_json(), plan_json()
    assert [c["cell_id"] for c in first] == [c["cell_id"] for c in second]
    assert len({c["cell_id"] for c in first}) == len(first) > 100
    assert {c["hardware"] for c in first} >= {"cpu", "sm_80", "sm_89", "sm_90"}


def test_fast_paths_give_the_defining_ids_and_json_byte_for_byte() -> None:
    """make_plan and json_lines encode what cells share once; the ids must be cell_id's (a
    changed id would start a new history row for every cell) and the JSON json.dumps's."""
    spec = load_matrix(ROOT / "matrix.yaml")
    plan = make_plan(spec, collect_cases(spec.cases_dir), ("cpu", "sm_90"))
    assert [c.cell_id for c in plan.cells] == [
        cell_id(c.env, c.case, c.hardware) for c in plan.cells]
    assert list(json_lines(plan.cells)) == [json.dumps(c.to_dict()) for c in plan.cells]


def test_filters() -> None:
    spec = load_matrix(ROOT / "matrix.yaml")
    plan = make_plan(spec, collect_cases(spec.cases_dir), ("cpu",))
    only = filter_plan(plan, only=["torch=2.0.1", "numpy=<2"], keyword="mergekit_fp16::repro",
                       hardware=["cpu"])
    assert {c.env.name for c in only.cells} == {
        "cpu:torch=2.0.1,numpy<2", "docker-cpu-torch2.0.1"}
    only = filter_plan(plan, only=["env=cpu:*", "torch=2.0.1", "numpy=<2"],
                       keyword="mergekit_fp16::repro", hardware=["cpu"])
    assert [(c.env.name, c.case.variant) for c in only.cells] == [
        ("cpu:torch=2.0.1,numpy<2", "repro"), ("cpu:torch=2.0.1,numpy<2", "repro_merged")]
    with pytest.raises(UsageError, match="no such axis"):
        filter_plan(plan, only=["torc=2.0.1"])
    with pytest.raises(UsageError, match="no cell matches"):
        filter_plan(plan, keyword="no-such-case")


def test_unknown_case_selector_is_reported_where_it_is_written(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(f"cases_dir: {ROOT / 'cases'}\nenvironments:\n  e:\n    cases: [mergekt]\n")
    spec = load_matrix(m)
    with pytest.raises(UsageError, match=r"m.yaml:4: environments.e.cases\[0\]: 'mergekt' "):
        make_plan(spec, collect_cases(spec.cases_dir), ("cpu",))

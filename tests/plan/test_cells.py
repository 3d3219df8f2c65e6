from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest

from harness.core.errors import SpecError, UsageError
from harness.core.matrix import CaseSelector
from harness.matrix.load import load_matrix
from harness.plan.cases import collect_cases, select_cases
from harness.plan.cells import (
    Cell,
    case_counter,
    cell_id,
    filter_plan,
    json_lines,
    make_plan,
)
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
    """make_plan encodes what cells share once; the ids must be cell_id's (a changed id would
    start a new history row for every cell). json_lines: each cell's to_dict, one a line."""
    spec = load_matrix(ROOT / "matrix.yaml")
    plan = make_plan(spec, collect_cases(spec.cases_dir), ("cpu", "sm_90"))
    assert [c.cell_id for c in plan.cells] == [
        cell_id(c.env, c.case.nodeid, c.hardware) for c in plan.cells]
    lines = list(json_lines(plan.cells))
    assert [json.loads(line) for line in lines] == [c.to_dict() for c in plan.cells]
    assert not any("\n" in line for line in lines)
    # cells made whole are the dataclass's own: equal and shown alike
    made = [Cell(cell_id=c.cell_id, env=c.env, case=c.case, hardware=c.hardware)
            for c in plan.cells[:50]]
    assert made == list(plan.cells[:50])
    assert list(map(repr, made)) == list(map(repr, plan.cells[:50]))
    odd = replace(plan.cells[0], cell_id='a "quoted" id é\n')
    assert [json.loads(line) for line in json_lines([odd])] == [odd.to_dict()]


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


def test_the_count_selects_cases_once_per_kind_of_environment(tmp_path: Path) -> None:
    """2,000 environments of one matrix entry share their selectors: the refusal selects the
    cases once, not once an environment (which took a second at 10,000 environments)."""
    m = tmp_path / "m.yaml"
    axis = ", ".join(f'"1.{i}"' for i in range(1000))
    m.write_text(f"cases_dir: {ROOT / 'cases'}\nmatrices:\n  m:\n    cases: [probes]\n"
                 f"    axes:\n      a: [{axis}]\n      b: ['<2', '>=2']\n")
    spec = load_matrix(m, max_cells=2001)
    cases = collect_cases(spec.cases_dir)
    with mock.patch("harness.plan.cells.select_cases", wraps=select_cases) as select, \
            pytest.raises(SpecError, match=r"m\.yaml:2: the matrix expands to 28,000 cells, "
                                           r"over the limit of 2,001 \(raise it with"):
        make_plan(spec, cases, ("cpu",))
    assert select.call_count == 1


def test_the_case_counter_counts_what_planning_selects_or_says_it_does_not_know(
        tmp_path: Path) -> None:
    count = case_counter()
    cases = collect_cases(ROOT / "cases")
    probes = (CaseSelector(pattern="probes", where="m.yaml:1"),)
    assert count(ROOT / "cases", probes) == len(select_cases(cases, probes)) > 1
    assert count(ROOT / "cases", ()) == len(cases)
    nothing = (CaseSelector(pattern="no-such-case", where="m.yaml:1"),)
    assert count(ROOT / "cases", nothing) is None  # planning names the selector, later
    assert count(tmp_path, probes) is None  # no pytest.ini: load_spec says so, at cases_dir

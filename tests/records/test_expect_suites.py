"""Judging a suite's tests: each test once, its session not again, and a line per
environment before the tests themselves."""

from __future__ import annotations

from harness.core.results import CellResult, Outcome
from tests.records.test_expect import judge, summary_lines


def result(env: str, variant: str, outcome: Outcome, parent: str = "") -> CellResult:
    return CellResult(run_id="r", cell_id=f"{env}/{variant}", environment=env, values={},
                      env_key="k", backend="uv", case_id="mylib", variant=variant,
                      nodeid=variant, hardware_target="cpu", outcome=outcome, parent=parent)


def test_a_session_is_judged_as_its_tests_and_summed_up_per_environment() -> None:
    results = []
    for env, failing in (("torch=2.2.2", 3), ("torch=2.5.1", 0)):
        session = f"{env}/(session)"
        results += [result(env, f"t.py::test_{i}", Outcome.FAIL if i < failing else
                           Outcome.PASS, parent=session) for i in range(30)]
        results.append(result(env, "(session)", Outcome.FAIL if failing else Outcome.PASS))
    verdicts = judge(results)
    assert len(verdicts) == 60  # not 62: the sessions are their tests
    lines = summary_lines(verdicts, limit=2)
    assert lines[:2] == ["against expectations: 3 new failures",
                         "  suite mylib in torch=2.2.2 @cpu: 3 new failures"]
    assert lines[-1] == "  ... and 1 more (compat.json lists them all)"

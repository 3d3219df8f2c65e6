"""What the terminal says of a suite as it runs, in pytest's words: its environment "built"
with its first test (not at the session's end), a running count of its tests, and at its end
the environment's line as pytest's summary line says it; tests are called tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.matrix import EnvSpec
from harness.core.results import CellResult, CellRun, Outcome
from harness.envs.base import Realizing
from harness.envs.host import HostBackend
from harness.matrix.load import parse_matrix
from harness.plan.cells import Cell, make_plan
from harness.plan.suites import pytest_words
from harness.run.cell import iter_batch
from harness.run.dispatch import dispatch
from harness.run.progress import RunProgress, pytest_duration
from tests.conftest import PY
from tests.run.test_env_notes import Store


def a_test(word: str, i: int, env: str = "host") -> CellResult:
    outcome = {"passed": Outcome.PASS, "failed": Outcome.FAIL}.get(word, Outcome.SKIP)
    return CellResult(run_id="r", cell_id=f"{env}-t{i}", environment=env, values={},
                      env_key="k", backend="uv", case_id="mine", variant=f"test_{i}",
                      nodeid=f"test_{i}", hardware_target="cpu", outcome=outcome, reason="",
                      parent=f"{env}-session", details={"pytest": word})


def session(counts: dict[str, int], duration: float, env: str = "host") -> CellResult:
    return CellResult(run_id="r", cell_id=f"{env}-session", environment=env, values={},
                      env_key="k", backend="uv", case_id="mine", variant="(session)",
                      nodeid="", hardware_target="cpu", outcome=Outcome.FAIL, reason="",
                      duration=duration, details={"suite": {"counts": counts}})


def test_a_session_off_a_terminal_says_its_count_as_it_runs_and_its_end_as_pytest_does(
        capsys: pytest.CaptureFixture[str]) -> None:
    words = ["passed", "passed", "failed", "skipped", "passed"]
    with RunProgress(1, live=False) as progress:
        progress.every = 0.0  # every test's count said (off a test: every EVERY seconds)
        for i, word in enumerate(words):
            progress.advance(a_test(word, i))
        progress.advance(session({"passed": 3, "failed": 1, "skipped": 1}, 41.2))
    assert capsys.readouterr().err.splitlines() == [
        "host: 1 test so far (1 passed)  mine @cpu",
        "host: 2 tests so far (2 passed)  mine @cpu",
        "host: 3 tests so far (1 failed, 2 passed)  mine @cpu",
        "host: 4 tests so far (1 failed, 2 passed, 1 skipped)  mine @cpu",
        "host: 5 tests so far (1 failed, 3 passed, 1 skipped)  mine @cpu",
        "host: 1 failed, 3 passed, 1 skipped in 41.20s  (mine @cpu)",
        "tests: 1 failed, 3 passed, 1 skipped"]


def test_off_a_terminal_a_long_session_says_its_count_every_few_seconds(
        capsys: pytest.CaptureFixture[str]) -> None:
    with RunProgress(1, live=False) as progress:
        for i in range(500):
            progress.advance(a_test("passed", i))
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["host: 1 test so far (1 passed)  mine @cpu", "tests: 500 passed"]


def test_on_a_terminal_the_bar_counts_tests_and_each_session_says_its_end(
        capsys: pytest.CaptureFixture[str]) -> None:
    with RunProgress(2, live=True) as progress:
        for i in range(3):
            progress.advance(a_test("passed", i, env="a"))
        assert progress.bar is not None
        assert progress.bar.tasks[0].description == "tests: 3 passed"
        assert progress.bar.tasks[0].completed == 0  # tests are not cells
        progress.advance(session({"passed": 3}, 75.0, env="a"))
        progress.advance(a_test("error", 9, env="b"))
        assert progress.bar.tasks[0].description == "tests: 3 passed, 1 error | cells: FAIL=1"
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "a: 3 passed in 75.00s (0:01:15)  (mine @cpu)" in lines
    assert "tests: 3 passed, 1 error" in lines  # the suites' tests together, at the end


def test_pytest_words_and_duration() -> None:
    assert pytest_words(Counter({"skipped": 111, "error": 2, "passed": 7780, "xfailed": 1})) == (
        "7780 passed, 111 skipped, 1 xfailed, 2 errors")
    assert pytest_words(Counter({"error": 1})) == "1 error"
    assert pytest_duration(41.2) == "41.20s"
    assert pytest_duration(3725.5) == "3725.50s (1:02:05)"


class BuildingHost(HostBackend):
    """The host backend, as if it had built the environment (as uv does the first time)."""

    def begin(self, spec: EnvSpec) -> Realizing:
        realizing = super().begin(spec)
        return replace(realizing, env=replace(realizing.env, built=True))


def suite_cell(tmp_path: Path) -> Cell:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "test_s.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    spec = parse_matrix(f"version: 1\nsuites: {{mine: {{path: {suite}}}}}\nenvironments:\n"
                        f"  host: {{backend: host, python: '{PY}', suites: [mine]}}\n",
                        file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    return cell


def test_a_built_environment_is_said_so_with_its_sessions_first_test(tmp_path: Path) -> None:
    cell = suite_cell(tmp_path)
    runs = list(iter_batch([cell], BuildingHost(tmp_path), None, cases_dir=tmp_path))
    assert [(r.result.variant, r.env_built) for r in runs] == [
        ("test_s.py::test_a", True), ("test_s.py::test_b", False), ("(session)", False)]


class Partials:
    """An executor whose one session ends after its tests came as partials (pure logic:
    what the driver says as a session's tests arrive)."""

    name, queues, targets, serves, capacity = "p", False, ("cpu",), frozenset({"cpu"}), 1

    def __init__(self, runs: Sequence[CellRun]) -> None:
        *self.tests, self.own = runs
        self.future: Future[CellRun] = Future()

    def slots_for(self, cell: Cell) -> int:
        return 1

    def describe(self) -> dict[str, object]:
        return {}

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1, draws: int = 1
               ) -> list[Future[CellRun]]:
        return [self.future]

    def partials(self) -> list[CellRun]:
        if not self.tests and not self.future.done():
            self.future.set_result(self.own)
        tests, self.tests = self.tests, []
        return tests

    def shutdown(self, *, cancel: bool = False) -> None:
        pass


def test_the_driver_says_built_and_hands_each_test_on_before_the_session_ends(
        tmp_path: Path) -> None:
    cell = suite_cell(tmp_path)
    runs = list(iter_batch([cell], BuildingHost(tmp_path), None, cases_dir=tmp_path))
    lines: list[str] = []
    dispatch([cell], Partials(runs), Store(), on_note=lines.append,
             on_result=lambda r: lines.append(f"{r.variant} {r.outcome}"))
    assert lines == ["environment host: built", "test_s.py::test_a PASS",
                     "test_s.py::test_b PASS", "(session) PASS"]


def test_a_retried_sessions_tests_are_counted_once(capsys: pytest.CaptureFixture[str]) -> None:
    # Its pytest killed after test 0 (no test running): the session runs again from the start.
    with RunProgress(1, live=False) as progress:
        progress.every = 0.0
        progress.advance(a_test("passed", 0))
        for i in range(3):
            progress.advance(a_test("passed", i).replace(attempt=2))
        progress.advance(session({"passed": 3}, 1.0))
    assert capsys.readouterr().err.splitlines() == [
        "host: 1 test so far (1 passed)  mine @cpu",
        "host: 1 test so far (1 passed)  mine @cpu",
        "host: 2 tests so far (2 passed)  mine @cpu",
        "host: 3 tests so far (3 passed)  mine @cpu",
        "host: 3 passed in 1.00s  (mine @cpu)",
        "tests: 3 passed"]


def test_a_resumed_sessions_kept_tests_count_in_the_closing_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    # Two tests were recorded before the run was resumed: its session counts them, and so
    # does the line for the whole run.
    with RunProgress(1, live=False) as progress:
        progress.advance(a_test("failed", 2))
        progress.advance(session({"passed": 2, "failed": 1}, 1.0))
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "host: 1 failed, 2 passed in 1.00s  (mine @cpu)", "tests: 1 failed, 2 passed"]
    with RunProgress(1, live=True) as progress:  # on a terminal, the bar says it at once
        progress.advance(a_test("failed", 2))
        progress.advance(session({"passed": 2, "failed": 1}, 1.0))
        assert progress.bar is not None
        assert progress.bar.tasks[0].description == "tests: 1 failed, 2 passed | cells: FAIL=1"

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.errors import SpecError, UsageError
from harness.core.results import CellResult, Outcome, counted
from harness.core.rules import Rule
from harness.matrix.load import parse_matrix
from harness.records.expect import (
    Baseline,
    Judgement,
    Key,
    _exit_code,
    _Judge,
    _summary,
    baseline_from,
    judged_exit,
    judged_lines,
    judged_report,
    judged_summary,
    load_baseline,
    resolve_baseline,
)
from harness.records.store import RunStore
from tests.conftest import ROOT, examples, report_dir, write_matrix
from tests.inproc import Ran, harness_main


def result(env: str, variant: str, outcome: Outcome, reason: str = "",
           hardware: str = "cpu") -> CellResult:
    return CellResult(run_id="r", cell_id=f"{env}-{variant}-{hardware}", environment=env,
                      values={}, env_key="k", backend="uv", case_id="case", variant=variant,
                      nodeid=f"test_case.py::test_{variant}", hardware_target=hardware,
                      outcome=outcome, reason=reason)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A cell's judgement, one by one (what the judging counts without making one a cell)."""

    result: CellResult
    expected: frozenset[Outcome]  # empty: any fine outcome
    status: str  # expected | new failure | fixed | changed | not run
    why: str = ""  # the rule's why, or "baseline <source>"

    @property
    def deviates(self) -> bool:
        return self.status in ("new failure", "fixed", "changed")


def judge(results: list[CellResult], rules: Sequence[Rule] = (),
          baseline: Baseline | None = None) -> list[Verdict]:
    return [Verdict(result=r, expected=j.expected, why=j.why, status=j.status)
            for r, j in _Judge(rules, baseline).each(counted(results))]


def exit_code(verdicts: Sequence[Verdict], fail_on: str) -> int:
    return _exit_code(((v.result.outcome, v.status) for v in verdicts), fail_on)


def summary_lines(verdicts: Sequence[Verdict], *, limit: int = 20) -> list[str]:
    cells = Counter(Judgement(v.result.outcome, v.expected, v.why, v.status) for v in verdicts)
    return _summary(cells, [(v.result, v.expected, v.status) for v in verdicts if v.deviates],
                    limit)


def rule(outcome: Outcome, **kw: str) -> Rule:
    return Rule(outcomes=frozenset({outcome}), why="because", **kw)


def statuses(verdicts: list) -> list[str]:  # type: ignore[type-arg]
    return [v.status for v in verdicts]


def test_judging_finds_the_rules_each_result_holds_for_in_the_order_written() -> None:
    """judge matches each glob once per distinct value; what it finds must be what
    ``Rule.holds_for`` says, cell by cell, for every mix of globs and reasons."""
    rules = [rule(Outcome.FAIL, environment="a*"), rule(Outcome.ERROR, case="case"),
             rule(Outcome.PASS, case="case::x*", hardware="sm_*"),
             rule(Outcome.CRASH, environment="b", reason="^killed"),
             rule(Outcome.SKIP, case="other"), rule(Outcome.TIMEOUT)]
    cells = [result(env, variant, Outcome.FAIL, reason, hw)
             for env in ("a1", "a2", "b") for variant in ("x", "x2", "y")
             for hw in ("cpu", "sm_90") for reason in ("", "killed by 9", "not killed")]
    for cell, verdict in zip(cells, judge(cells, rules), strict=True):
        holding = [r for r in rules if r.holds_for(cell)]
        assert verdict.expected == frozenset().union(*(r.outcomes for r in holding))
        assert verdict.why == holding[0].why


def test_without_rules_or_baseline_every_failure_is_new_and_fine_outcomes_are_expected() -> None:
    got = judge([result("a", "x", Outcome.PASS), result("a", "y", Outcome.REPRODUCED),
                 result("a", "z", Outcome.FAIL), result("a", "w", Outcome.NOT_RUN)])
    assert statuses(got) == ["expected", "expected", "new failure", "not run"]
    assert [exit_code(got, f) for f in ("new", "changed", "any")] == [1, 1, 1]


def test_a_rule_with_a_reason_holds_only_for_that_reason() -> None:
    known = rule(Outcome.ERROR, environment="kt-*", reason=r"resolve host: github\.com")
    got = judge([result("kt-1", "x", Outcome.ERROR, "Could not resolve host: github.com"),
                 result("kt-1", "y", Outcome.ERROR, "disk full"),
                 result("kt-1", "z", Outcome.PASS)],  # built where GitHub is reachable
                [known])
    assert statuses(got) == ["expected", "new failure", "expected"]
    assert got[0].why == "because"


def test_known_failures_pass_new_and_changed_but_not_any() -> None:
    got = judge([result("kt", "x", Outcome.ERROR, "github.com")],
                [rule(Outcome.ERROR, reason="github")])
    assert [exit_code(got, f) for f in ("new", "changed", "any")] == [0, 0, 1]


def test_a_documented_failure_that_stops_reproducing_is_a_change() -> None:
    documented = rule(Outcome.REPRODUCED, environment="torch-2.0.1", case="case::repro*")
    got = judge([result("torch-2.0.1", "repro", Outcome.PASS),
                 result("torch-2.0.1", "repro_merged", Outcome.REPRODUCED),
                 result("torch-2.2.2", "repro", Outcome.REPRODUCED)], [documented])
    assert statuses(got) == ["changed", "expected", "expected"]
    assert [exit_code(got, f) for f in ("new", "changed", "any")] == [0, 1, 0]


def test_a_case_glob_without_variant_names_the_case() -> None:
    assert rule(Outcome.PASS, case="case").selects(("e", "case::repro[a]", "cpu"))
    assert not rule(Outcome.PASS, case="other").selects(("e", "case::repro", "cpu"))
    assert not rule(Outcome.PASS, hardware="sm_90").selects(("e", "case::repro", "cpu"))


def test_the_baseline_says_what_each_cell_was_and_rules_win_over_it() -> None:
    base = Baseline(source="last-night", outcomes={
        ("a", "case::x", "cpu"): Outcome.FAIL, ("a", "case::y", "cpu"): Outcome.PASS,
        ("a", "case::z", "cpu"): Outcome.ERROR, ("a", "case::w", "cpu"): Outcome.NOT_RUN})
    got = judge([result("a", "x", Outcome.FAIL),   # still failing: as expected
                 result("a", "y", Outcome.CRASH),  # new
                 result("a", "z", Outcome.PASS),   # fixed
                 result("a", "w", Outcome.FAIL),   # the baseline never ran it: new
                 result("a", "v", Outcome.PASS)],  # not in the baseline: fine is expected
                [rule(Outcome.PASS, case="case::z")], base)
    assert statuses(got) == ["expected", "new failure", "expected", "new failure", "expected"]
    assert got[0].why == "baseline last-night" and got[2].why == "because"
    fixed = judge([result("a", "x", Outcome.PASS)], (), base)
    assert statuses(fixed) == ["fixed"] and exit_code(fixed, "new") == 0
    assert exit_code(fixed, "changed") == 1


def test_a_baseline_file_round_trips_and_bad_ones_are_one_line(tmp_path: Path) -> None:
    data = baseline_from([result("a", "x", Outcome.FAIL), result("a", "y", Outcome.NOT_RUN)],
                         "r1")
    assert [c["case"] for c in data["cells"]] == ["case::x"]  # NOT_RUN says nothing
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    loaded = load_baseline(path, tmp_path)
    assert loaded.source == "r1" and loaded.outcomes == {("a", "case::x", "cpu"): Outcome.FAIL}
    path.write_text('{"cells": []}')
    with pytest.raises(UsageError, match="not a baseline file"):
        load_baseline(path, tmp_path)
    with pytest.raises(UsageError, match="neither a baseline file nor a run"):
        load_baseline(tmp_path / "absent.json", tmp_path)


def spec(expect: str) -> str:
    return ("version: 1\nenvironments:\n  kt: {backend: host}\n  other: {backend: host}\n"
            f"expect:\n{expect}")


def test_expect_rules_are_read_from_the_matrix(tmp_path: Path) -> None:
    m = parse_matrix(spec("  - {environment: kt, outcome: [ERROR, FAIL], reason: 'git(hub)?',"
                          " why: no GitHub here}\n"), file="m.yaml", base=tmp_path)
    (only,) = m.expect
    assert only.outcomes == {Outcome.ERROR, Outcome.FAIL} and only.reason == "git(hub)?"
    assert only.where == "m.yaml:6"


@pytest.mark.parametrize(("rule_text", "message"), [
    ("  - {environment: kt, outcome: ERROR}", "m.yaml:6: expect[0]: a rule needs 'why'"),
    ("  - {environment: nope*, outcome: ERROR, why: x}",
     "m.yaml:6: expect[0].environment: 'nope*' matches no environment of this matrix"),
    ("  - {outcome: BROKEN, why: x}", "m.yaml:6: expect[0].outcome: 'BROKEN' is not an outcome"),
    ("  - {outcome: [PASS, NOT_RUN], why: x}", "m.yaml:6: expect[0].outcome[1]: 'NOT_RUN'"),
    ("  - {outcome: ERROR, reason: '(', why: x}",
     "m.yaml:6: expect[0].reason: not a regular expression"),
    ("  - {outcome: ERROR, why: '  '}", "m.yaml:6: expect[0].why: say why"),
    ("  - {outcome: ERROR, why: x, when: never}", "m.yaml:6: expect[0].when: unknown key"),
    ("  kt: ERROR", "m.yaml:5: expect: expected a list of rules"),
])
def test_bad_expect_rules_are_one_line_errors(tmp_path: Path, rule_text: str,
                                              message: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_matrix(spec(rule_text + "\n"), file="m.yaml", base=tmp_path)
    assert str(info.value).startswith(message), str(info.value)


CASES = '''
import os


def test_flip():
    assert os.environ.get("FLIP") != "1", "flipped"


def test_known():
    raise RuntimeError("Could not resolve host: github.com")
'''


def harness(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str,
            flip: bool = False) -> Ran:
    return harness_main(capsys, "--reports", str(tmp_path / "r"), *args, cwd=tmp_path,
                        env={"FLIP": "1" if flip else "0", "HARNESS_PASS_ENV": "FLIP"})


def test_the_exit_code_says_what_ci_asks(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "test_flip_case.py").write_text(CASES)
    (tmp_path / "cases" / "pytest.ini").write_text("[pytest]\n")
    m = write_matrix(tmp_path / "matrix.yaml", (
        "version: 1\ncases_dir: cases\nenvironments:\n  host: {backend: host, python: '@PY@'}\n"
        "expect:\n  - {environment: host, case: flip_case::known, outcome: FAIL,\n"
        "     reason: 'resolve host: github', why: GitHub is out of reach here}\n"))
    first = harness(tmp_path, capsys, "run", "-m", str(m), "--run-id", "night1")
    assert first.returncode == 0, first.stdout + first.stderr  # the known failure is expected
    assert "known: 1 cell: GitHub is out of reach here" in first.stdout
    latest = tmp_path / "r" / "latest"
    assert latest.resolve() == (tmp_path / "r" / "runs" / "night1" / "report").resolve()
    assert harness(tmp_path, capsys, "report", "night1", "--fail-on", "any").returncode == 1
    sliced = harness(tmp_path, capsys, "run", "-m", str(m), "-k", "known", "--run-id", "slice")
    assert sliced.returncode == 0 and (tmp_path / "r" / "runs" / "slice" / "report").is_dir()
    assert latest.resolve().parent.name == "night1"  # a -k run never moves reports/latest
    assert harness(tmp_path, capsys, "baseline", "night1", "-o", "b.json").returncode == 0

    second = harness(tmp_path, capsys, "run", "-m", str(m), "--run-id", "night2", flip=True)
    assert second.returncode == 1  # a cell newly fails
    assert "new failure: host flip_case::flip @cpu: FAIL (expected fine)" in second.stdout
    against = harness(tmp_path, capsys, "report", "night2", "--baseline", "b.json",
                      "--fail-on", "new")
    assert against.returncode == 1
    # Judged by last night's record, the flip is still failing: no news.
    still = harness(tmp_path, capsys, "run", "-m", str(m), "--run-id", "night3", "--baseline",
                    "night2", flip=True)
    assert still.returncode == 0, still.stdout + still.stderr
    data = json.loads((report_dir(tmp_path / "r") / "compat.json").read_text())
    assert {(e["case"], e["status"]) for e in data["expectations"]} == {
        ("flip_case::flip", "expected"), ("flip_case::known", "expected")}
    bad = harness(tmp_path, capsys, "run", "-m", str(m), "--baseline", "nowhere.json")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_the_default_matrix_expects_te_2_2_not_to_build_against_torch_2_1_2() -> None:
    """The reason is the one a failed TE 2.2.0 build on torch 2.1.2 gave on this machine
    (uv's message led by ``first_compiler_error`` of gcc's line); another ERROR of the same
    environment, or the same error on torch 2.4.1, is still news."""
    from harness.envs.sourcebuild import first_compiler_error
    from harness.matrix.load import load_matrix

    gcc = ("/root/.cache/uv/sdists-v9/pypi/transformer-engine-torch/2.2.0/x/src/transformer_engine/"
           "pytorch/csrc/extensions/util.cpp:9:10: fatal error: ATen/cuda/CUDAContextLight.h: "
           "No such file or directory")
    cause = first_compiler_error(f"building...\n{gcc}\ncompilation terminated.\n")
    assert cause is not None
    spec = load_matrix(ROOT / "matrix.yaml")
    old, new = ("gpu:cuda=12.1,torch=2.1.2,te=2.2.0,flash_attn=—",
                "gpu:cuda=12.1,torch=2.4.1,te=2.2.0,flash_attn=—")
    build = (f"uv pip failed for x: {cause}\n"
             "error: Failed to build `transformer-engine-torch==2.2.0`")
    got = judge([result(old, "repro", Outcome.ERROR, build, "sm_90"),
                 result(old, "repro", Outcome.ERROR, "disk full", "sm_90"),
                 result(new, "repro", Outcome.ERROR, build, "sm_90")], spec.expect)
    assert statuses(got) == ["expected", "new failure", "new failure"]


# -- judging counted per distinct input must be judging cell by cell -------------------------

def reference_judge(results: list[CellResult], rules: list[Rule],
                    baseline: Baseline | None) -> list[tuple[CellResult, frozenset[Outcome],
                                                             str, str]]:
    """Cell by cell, straight from ``Rule.holds_for`` and the baseline (what ``judge``
    computed before it matched each glob and reason once per distinct value)."""
    sessions = {r.parent for r in results if r.parent}
    out = []
    for r in [r for r in results if r.cell_id not in sessions]:
        holding = [rule for rule in rules if rule.holds_for(r)]
        before = baseline.outcomes.get(r.logical_key) if baseline else None
        if holding:
            expected: frozenset[Outcome] = frozenset().union(*(h.outcomes for h in holding))
            why = holding[0].why
        elif before not in (None, Outcome.NOT_RUN, Outcome.MISSING):
            assert baseline is not None and before is not None
            expected, why = frozenset({before}), f"baseline {baseline.source}"
        else:
            expected, why = frozenset(), ""
        if r.outcome is Outcome.NOT_RUN:
            status = "not run"
        elif r.outcome in expected or (not expected and r.outcome.ok):
            status = "expected"
        elif not r.outcome.ok:
            status = "new failure"
        else:
            status = "fixed" if all(not o.ok for o in expected) else "changed"
        out.append((r, expected, why, status))
    return out


def reference_summary(verdicts: list[Verdict], limit: int) -> list[str]:
    """``summary_lines`` as it was, verdict by verdict."""
    from collections import Counter
    counts = Counter(v.status for v in verdicts)
    known = [v for v in verdicts if v.status == "expected" and not v.result.outcome.ok]
    parts = [f"{counts[s]} {s}" + ("s" if counts[s] != 1 and s == "new failure" else "")
             for s in ("new failure", "fixed", "changed") if counts[s]]
    if known:
        parts.append(f"{len(known)} known failure" + ("s" if len(known) != 1 else ""))
    lines = ["against expectations: " + (", ".join(parts) or "as expected")]
    for why, n in Counter(v.why for v in known).most_common():
        lines.append(f"  known: {n} cell{'s' if n != 1 else ''}: {why}")
    per_suite = Counter((v.result.case_id, v.result.environment, v.result.hardware_target,
                         v.status) for v in verdicts if v.deviates and v.result.parent)
    for (suite, env, hw, status), n in sorted(per_suite.items()):
        lines.append(f"  suite {suite} in {env} @{hw}: {n} {status}"
                     + ("s" if n != 1 and status == "new failure" else ""))
    for v in [v for v in verdicts if v.deviates][:limit]:
        r = v.result
        wanted = "/".join(sorted(str(o) for o in v.expected)) or "fine"
        lines.append(f"  {v.status}: {r.environment} {r.case_id}::{r.variant} "
                     f"@{r.hardware_target}: {r.outcome} (expected {wanted})")
    extra = sum(v.deviates for v in verdicts) - limit
    if extra > 0:
        lines.append(f"  ... and {extra} more (compat.json lists them all)")
    return lines


GLOBS = st.sampled_from(["*", "a*", "a1", "b", "?2", "[ab]1", "x"])
CASE_GLOBS = st.sampled_from(["*", "case", "c*", "other", "case::x*", "case::y", "*::x",
                              "c?se::*"])
REASONS = st.sampled_from(["", "killed by 9", "not killed", "Could not resolve host",
                           "x::y"])
OUTCOMES = st.sampled_from(list(Outcome))

rules_st = st.lists(st.builds(
    lambda outcomes, why, env, case, hw, reason: Rule(
        outcomes=frozenset(outcomes), why=why, environment=env, case=case, hardware=hw,
        reason=reason),
    st.sets(OUTCOMES, min_size=1, max_size=3), st.sampled_from(["w1", "w2", "w3"]), GLOBS,
    CASE_GLOBS, st.sampled_from(["*", "cpu", "sm_*"]),
    st.none() | st.sampled_from(["^killed", "resolve host", "killed", "::"])), max_size=5)


@st.composite
def cells_st(draw: st.DrawFn) -> list[CellResult]:
    n = draw(st.integers(0, 40))
    cells = []
    for i in range(n):
        env = draw(st.sampled_from(["a1", "a2", "b", "b1"]))
        case_id = draw(st.sampled_from(["case", "cse", "other"]))
        variant = draw(st.sampled_from(["x", "x2", "y"]))
        cells.append(CellResult(
            run_id="r", cell_id=f"c{i}", environment=env, values={}, env_key="k",
            backend="uv", case_id=case_id, variant=variant, nodeid=f"t.py::test_{variant}",
            hardware_target=draw(st.sampled_from(["cpu", "sm_90"])),
            outcome=draw(OUTCOMES), reason=draw(REASONS),
            # a suite's test names its session (another cell), which is then not judged
            parent=draw(st.sampled_from(["", "", "", f"c{draw(st.integers(0, max(n - 1, 0)))}"]))))
    return cells


@settings(max_examples=examples(300), deadline=None)
@given(cells=cells_st(), rules=rules_st,
       baseline=st.none() | st.dictionaries(
           st.tuples(st.sampled_from(["a1", "a2", "b"]),
                     st.sampled_from(["case::x", "case::y", "other::x2"]),
                     st.sampled_from(["cpu", "sm_90"])), OUTCOMES),
       limit=st.integers(0, 5))
def test_judging_once_per_distinct_input_is_judging_cell_by_cell(
        cells: list[CellResult], rules: list[Rule], baseline: dict[Key, Outcome] | None,
        limit: int) -> None:
    """``judge`` (cached per glob value, reason and judgement) gives each cell the verdict
    ``Rule.holds_for`` and the baseline give it; ``judged_summary`` (what a merge prints
    and exits with, counted per judgement) the summary lines and exit code of those
    verdicts, as the verdict-by-verdict code gave them; ``judged_report`` (what a report
    prints and lists) those lines and the verdicts that deviate or expected a failure."""
    known = Baseline(source="b", outcomes=baseline) if baseline is not None else None
    verdicts = judge(cells, rules, known)
    want = reference_judge(cells, rules, known)
    assert [(v.result, v.expected, v.why, v.status) for v in verdicts] == want
    assert summary_lines(verdicts, limit=limit) == reference_summary(verdicts, limit)
    lines, notable = judged_report(cells, rules, known, limit=limit)
    assert lines == reference_summary(verdicts, limit)
    assert [(r, j.expected, j.why, j.status) for r, j in notable] == [
        (v.result, v.expected, v.why, v.status) for v in verdicts
        if v.deviates or (v.status == "expected" and not v.result.outcome.ok)]
    for fail_on in ("new", "changed", "any"):
        lines, code = judged_summary(cells, rules, known, fail_on, limit=limit)
        assert lines == reference_summary(verdicts, limit)
        assert code == exit_code(verdicts, fail_on)
        assert code == (
            any(not r.outcome.ok for r, *_ in want) if fail_on == "any" else
            any(s == "new failure" for *_, s in want) if fail_on == "new" else
            any(s in ("new failure", "fixed", "changed") for *_, s in want))


def test_judged_summary_refuses_an_unknown_fail_on() -> None:
    with pytest.raises(UsageError, match="--fail-on 'some'"):
        judged_summary([result("a", "x", Outcome.FAIL)], (), None, "some")


def test_known_failures_are_listed_by_count_then_in_the_order_first_seen() -> None:
    rules = [Rule(outcomes=frozenset({Outcome.FAIL}), why=why, environment=env)
             for why, env in (("zeta", "z"), ("alpha", "a"), ("beta", "b"))]
    cells = [result(env, f"v{i}", Outcome.FAIL) for i, env in enumerate("zabb")]
    want = ["against expectations: 4 known failures", "  known: 2 cells: beta",
            "  known: 1 cell: zeta", "  known: 1 cell: alpha"]
    assert summary_lines(judge(cells, rules)) == want
    assert judged_summary(cells, rules) == (want, 0)


def test_judged_lines_are_what_judged_exit_prints(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for run_id, outcomes in (("news", (Outcome.PASS, Outcome.FAIL)),
                             ("quiet", (Outcome.PASS, Outcome.PASS))):
        store = RunStore.create(tmp_path, {"planned": [], "expect": []}, run_id=run_id)
        store.extend([CellResult(run_id=run_id, cell_id=f"c{i}", environment="e", values={},
                                 env_key="k", backend="uv", case_id="case", variant=f"v{i}",
                                 nodeid="n", hardware_target="cpu", outcome=outcome)
                      for i, outcome in enumerate(outcomes)])
        for fail_on in ("new", "any"):
            lines, code = judged_lines([store], fail_on, None)
            assert judged_exit([store], tmp_path, fail_on, None) == code
            assert capsys.readouterr().out == ("\n".join(lines) + "\n" if lines else "")
            # A failure nobody expected is news, and fails the run; two passes are neither.
            assert (bool(lines), code != 0) == ((True, True) if run_id == "news"
                                                else (False, False))


def test_a_baseline_run_whose_run_json_is_damaged_is_said_so(tmp_path: Path) -> None:
    """Not "neither a baseline file nor a run": the run is there, its run.json is not read."""
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "run.json").write_text("[1]")
    with pytest.raises(UsageError) as raised:
        resolve_baseline("x", tmp_path)
    assert str(raised.value) == f"--baseline x: {run / 'run.json'}: Expected `object`, got `array`"

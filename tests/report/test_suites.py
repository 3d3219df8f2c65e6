"""A test suite's report: totals per environment, the tests that differ with the versions that
decide them (both axes), tests the same everywhere counted, and a check that can fail."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.core.results import CellResult, Outcome
from harness.records.store import RunStore
from harness.report.build import prepare, write_report
from harness.report.check import check, check_run
from harness.report.site.model import build_site
from harness.report.site.render import render_site

TORCH = ("2.0.1", "2.2.2", "2.5.1")
NUMPY = ("1.26.4", "2.4.6")
SUITE = {"lib::(session)": {"case": "lib", "variant": "(session)",
                            "suite": {"name": "lib", "pyargs": "lib.tests", "path": None}}}
WORD = {Outcome.PASS: "passed", Outcome.FAIL: "failed", Outcome.SKIP: "skipped"}


def env(torch: str, numpy: str) -> str:
    return f"lib:torch={torch},numpy={numpy}"


def result(torch: str, numpy: str, variant: str, outcome: Outcome, **fields: object
           ) -> CellResult:
    name = env(torch, numpy)
    return CellResult(run_id="r", cell_id=f"{name}/{variant}", environment=name,
                      values={"torch": torch, "numpy": numpy}, env_key=name, backend="uv",
                      case_id="lib", variant=variant, nodeid=variant, hardware_target="cpu",
                      outcome=outcome, fingerprint={"key": {"torch": torch, "numpy": numpy}},
                      **fields)  # type: ignore[arg-type]


def suite_run() -> list[CellResult]:
    """torch's numpy bridge fails with numpy 2 before torch 2.5; a test skipped with numpy 1;
    one that exists only from torch 2.2 on; 50 that pass everywhere."""
    out = []
    for torch in TORCH:
        for numpy in NUMPY:
            session = f"{env(torch, numpy)}/(session)"
            tests = {f"tests/test_ok.py::test_{i}": Outcome.PASS for i in range(50)}
            tests["tests/test_bridge.py::test_from_numpy"] = (
                Outcome.FAIL if numpy == "2.4.6" and torch != "2.5.1" else Outcome.PASS)
            tests["tests/test_new.py::test_numpy2_only"] = (
                Outcome.SKIP if numpy == "1.26.4" else Outcome.PASS)
            if torch != "2.0.1":
                tests["tests/test_compile.py::test_new_api"] = Outcome.PASS
            children = [result(torch, numpy, t, o, parent=session,
                               details={"pytest": WORD[o]},
                               reason="RuntimeError: Numpy is not available"
                               if o is Outcome.FAIL else "")
                        for t, o in tests.items()]
            counts: dict[str, int] = {}
            for o in tests.values():
                counts[WORD[o]] = counts.get(WORD[o], 0) + 1
            out += children
            out.append(result(torch, numpy, "(session)",
                              Outcome.FAIL if "failed" in counts else Outcome.PASS,
                              details={"suite": {"counts": counts, "imported": [
                                  {"name": "lib", "version": "1.0", "installed": True,
                                   "file": ".../site-packages/lib/__init__.py"}]}}))
    return out


def envs() -> dict[str, dict[str, object]]:
    return {env(t, n): {"requirements": [f"torch=={t}", f"numpy=={n}"], "backend": "uv"}
            for t in TORCH for n in NUMPY}


def test_the_differing_tests_name_the_combination_that_decides_them() -> None:
    site = build_site(suite_run(), envs(), SUITE, [{"run_id": "r"}], {})
    assert site.failures == ()  # a suite is not a documented failure
    (table,) = site.suites
    assert table.varying == ("torch", "numpy")
    assert dict(table.same) == {"passes": 50}
    claims = {d.test: d.claim.text for d in table.differing}
    assert claims == {
        "tests/test_bridge.py::test_from_numpy":
            "fails with torch 2.0.1, 2.2.2 with numpy 2.4.6",
        "tests/test_new.py::test_numpy2_only": "skipped with numpy 1.26.4",
        "tests/test_compile.py::test_new_api": "not collected with torch 2.0.1"}
    first = next(d for d in table.differing if d.test.endswith("test_from_numpy"))
    assert first.lines == ("RuntimeError: Numpy is not available",)
    totals = {t.column.name: dict(t.counts) for t in table.totals}
    assert totals["torch 2.0.1 · numpy 2.4.6 @cpu"] == {"passed": 51, "failed": 1}
    # In pytest's words, as the terminal says them (it said "51 passed, 1 failed").
    assert "torch 2.0.1 · numpy 2.4.6 @cpu: 1 failed, 51 passed;" in table.summary
    assert site.header.cells == 6 * 52 + 4  # the tests, not their sessions once more


def test_the_suite_report_agrees_with_its_record_and_the_check_can_fail(
        tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "reports", {"planned": [], "environments": envs()},
                            cases=SUITE)
    store.extend(suite_run())
    out = tmp_path / "report"
    write_report([store], out)
    assert check_run([store], out) == []
    # a suite's run has no probe: no page links a capability grid it would not have
    assert all('href="probes.html"' not in (out / page).read_text(encoding="utf-8")
               for page in ("index.html", "cells.html", "suite-lib.html"))
    text = (out / "compat.md").read_text(encoding="utf-8")
    assert "| tests/test_new.py::test_numpy2_only" not in text  # test ids are code
    assert "**Same in every environment:** 50 pass everywhere." in text
    # The model changed by hand: a claim, the count of the same, a session's totals.
    report = prepare([store], out)
    (table,) = report.site.suites
    bridge = next(d for d in table.differing if d.test.endswith("test_from_numpy"))
    claim = replace(bridge.claim, packages=("numpy",), combos=(("2.4.6",),))
    first = next(t for t in table.totals if t.column.name == "torch 2.0.1 · numpy 2.4.6 @cpu")
    assert dict(first.counts) == {"passed": 51, "failed": 1}
    changed = replace(table, same=(("passes", 51),), differing=tuple(
        replace(d, claim=claim) if d is bridge else d for d in table.differing),
        totals=tuple(replace(t, counts=(("passed", 51),)) if t is first else t
                     for t in table.totals))
    problems = check(replace(report.site, suites=(changed,)), store.results(), envs(), SUITE)
    assert any("test_from_numpy: says 'fails with numpy 2.4.6'" in p for p in problems), problems
    assert any("says the same everywhere" in p for p in problems), problems
    assert any("says 0 failed; the record has 1" in p for p in problems), problems
    assert len(problems) == 3, problems


def test_the_suite_page_shows_the_model_the_check_reads(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "reports", {"planned": [], "environments": envs()},
                            cases=SUITE)
    store.extend(suite_run())
    out = tmp_path / "report"
    write_report([store], out)
    (table,) = prepare([store], out).site.suites
    page = (out / "suite-lib.html").read_text(encoding="utf-8")
    md = (out / "compat.md").read_text(encoding="utf-8")
    assert [d.claim.text for d in table.differing] == [
        "fails with torch 2.0.1, 2.2.2 with numpy 2.4.6", "not collected with torch 2.0.1",
        "skipped with numpy 1.26.4"]
    for differing in table.differing:
        assert f"<td>{differing.claim.text}</td>" in page
        assert f"| {differing.claim.text} |" in md


def test_a_test_that_fails_two_ways_shows_both_first_lines(tmp_path: Path) -> None:
    run = suite_run()
    bridge = "tests/test_bridge.py::test_from_numpy"
    for i, r in enumerate(run):  # on torch 2.2.2 it fails another way
        if r.variant == bridge and r.outcome is Outcome.FAIL and "2.2.2" in r.environment:
            run[i] = CellResult.from_dict({**r.to_dict(), "reason": "AttributeError: module "
                                           "'numpy' has no attribute 'in1d'\nTraceback ..."})
    site = build_site(run, envs(), SUITE, [{"run_id": "r"}], {})
    (row,) = [d for d in site.suites[0].differing if d.test == bridge]
    assert row.lines == ("RuntimeError: Numpy is not available",
                         "AttributeError: module 'numpy' has no attribute 'in1d'")
    store = RunStore.create(tmp_path / "reports", {"planned": [], "environments": envs()},
                            cases=SUITE)
    store.extend(run)
    out = tmp_path / "report"
    write_report([store], out)
    md = (out / "compat.md").read_text(encoding="utf-8")
    assert ("RuntimeError: Numpy is not available<br>AttributeError: module 'numpy' has no "
            "attribute 'in1d' |") in md
    page = (out / "suite-lib.html").read_text(encoding="utf-8")
    assert "Numpy is not available<br>AttributeError: module &#39;numpy&#39;" in page


def test_one_differing_test_is_said_in_the_singular(tmp_path: Path) -> None:
    """It said "1 tests differ", in the summary and on the suite's page."""
    run = [r for r in suite_run() if "test_new" not in r.variant and "compile" not in r.variant]
    site = build_site(run, envs(), SUITE, [{"run_id": "r"}], {})
    (table,) = site.suites
    assert table.summary.endswith(" — 1 test differs"), table.summary
    render_site(site, tmp_path, [], [[None]])
    page = (tmp_path / "suite-lib.html").read_text(encoding="utf-8")
    assert "<h2>1 test differs between environments</h2>" in page

"""The consistency check: a report says only what its record holds, and the check can fail."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.results import CellResult, Outcome
from harness.records.store import RunStore
from harness.report.build import write_report
from harness.report.check import check_run
from tests.conftest import examples

CASES = {
    "mk::repro": {"case": "mk", "variant": "repro", "failure": "addmm on Half",
                  "signatures": [{"name": "addmm-half"}]},
    "mk::workaround[bfloat16]": {"case": "mk", "variant": "workaround[bfloat16]",
                                 "failure": "addmm on Half", "signatures": []},
    "probes::numpy_bridge": {"case": "probes", "variant": "numpy_bridge", "requires": [
        {"packages": {"torch": "", "numpy": ""}}], "signatures": [{"name": "numpy-abi"}]},
    "probes::sdpa[cpu]": {"case": "probes", "variant": "sdpa[cpu]",
                          "requires": [{"packages": {"torch": ""}}], "signatures": []},
}


def result(torch: str, numpy: str, case: str, outcome: Outcome, hardware: str = "cpu",
           backend: str = "uv") -> CellResult:
    env = f"{backend}:torch={torch},numpy={numpy}"
    case_id, variant = case.split("::")
    return CellResult(run_id="r", cell_id=f"{env}/{case}/{hardware}", environment=env,
                      values={"torch": torch, "numpy": numpy}, env_key=env, backend=backend,
                      case_id=case_id, variant=variant, nodeid=f"t.py::{variant}",
                      hardware_target=hardware, outcome=outcome,
                      reason="boom" if outcome is Outcome.REPRODUCED else "",
                      fingerprint={"key": {"torch": torch, "numpy": numpy}})


def reported(tmp_path: Path, results: list[CellResult]) -> tuple[RunStore, Path]:
    envs = {r.environment: {"requirements": [f"torch=={r.values['torch']}",
                                             f"numpy=={r.values['numpy']}"],
                            "backend": r.backend} for r in results}
    store = RunStore.create(tmp_path / "reports", {"planned": [], "environments": envs},
                            cases=CASES)
    store.extend(results)
    out = tmp_path / "report"
    write_report([store], out)
    return store, out


MERGEKIT = [result("2.0.1", "1.26.4", "mk::repro", Outcome.REPRODUCED),
            result("2.0.1", "1.26.4", "mk::workaround[bfloat16]", Outcome.PASS),
            result("2.1.2", "1.26.4", "mk::repro", Outcome.REPRODUCED),
            result("2.1.2", "1.26.4", "mk::workaround[bfloat16]", Outcome.PASS),
            result("2.2.2", "1.26.4", "mk::repro", Outcome.PASS),
            result("2.2.2", "1.26.4", "mk::workaround[bfloat16]", Outcome.PASS),
            result("2.0.1", "2.4.6", "probes::numpy_bridge", Outcome.REPRODUCED),
            result("2.0.1", "1.26.4", "probes::numpy_bridge", Outcome.PASS),
            result("2.2.2", "1.26.4", "probes::sdpa[cpu]", Outcome.SKIP),
            result("2.1.2", "1.26.4", "mk::repro", Outcome.NOT_RUN, "sm_90")]


def test_a_report_agrees_with_its_record(tmp_path: Path) -> None:
    store, out = reported(tmp_path, MERGEKIT)
    assert check_run([store], out) == []


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_report_edited_to_contradict_its_record_fails(tmp_path: Path) -> None:
    store, out = reported(tmp_path, MERGEKIT)
    md = out / "compat.md"
    edit(md, "affected: torch 2.0.1, 2.1.2", "affected: torch 2.0.1")
    edit(md, "repro: ✅ PASS", "repro: 🐞 REPRODUCED")
    edit(md, "missing: torch 2.0.1 with numpy 2.4.6", "works: torch 2.0.1 with numpy 2.4.6")
    problems = check_run([store], out)
    assert any("'affected'" in p for p in problems), problems
    assert any("@cpu shows" in p for p in problems), problems
    assert any("grid numpy_bridge" in p for p in problems), problems
    assert any(p.startswith("probes.html") for p in problems), problems  # no longer the same


def test_the_pages_must_say_what_compat_md_says(tmp_path: Path) -> None:
    store, out = reported(tmp_path, MERGEKIT)
    edit(out / "failure-mk.html", "affected: torch 2.0.1, 2.1.2", "affected: torch 2.0.1")
    edit(out / "failure-mk.html", "repro: REPRODUCED", "repro: PASS")
    edit(out / "index.html", "not affected: torch", "unaffected: torch")
    problems = check_run([store], out)
    assert "failure-mk.html: its verdict is not compat.md's" in problems
    assert any(p.startswith("failure-mk.html: uv:torch=2.0.1") for p in problems), problems
    assert "index.html: its verdicts are not compat.md's" in problems


def test_the_coverage_counts_are_checked(tmp_path: Path) -> None:
    store, out = reported(tmp_path, MERGEKIT)
    edit(out / "compat.md", "5 PASS", "6 PASS")
    problems = check_run([store], out)
    assert any(p.startswith("coverage says") for p in problems), problems
    assert "index.html: its coverage line is not compat.md's" in problems


OUTCOMES = st.sampled_from([Outcome.PASS, Outcome.REPRODUCED, Outcome.FAIL, Outcome.SKIP,
                            Outcome.ERROR, Outcome.CRASH, Outcome.TIMEOUT, Outcome.NOT_RUN,
                            Outcome.FLAKY])
TORCH = st.sampled_from(["2.0.1", "2.1.2", "2.2.2", "2.5.1", "2.15.0"])
NUMPY = st.sampled_from(["1.26.4", "2.4.6"])
CELLS = st.lists(st.tuples(TORCH, NUMPY, st.sampled_from(sorted(CASES)), OUTCOMES,
                           st.sampled_from(["cpu", "sm_90"]), st.sampled_from(["uv", "docker"])),
                 min_size=1, max_size=40,
                 unique_by=lambda c: (c[0], c[1], c[2], c[4], c[5]))


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=CELLS)
def test_every_generated_record_reports_only_what_it_holds(
        tmp_path_factory: pytest.TempPathFactory,
        cells: list[tuple[str, str, str, Outcome, str, str]]) -> None:
    """Random outcomes over random axes, probes and cases: the check finds no contradiction."""
    tmp = tmp_path_factory.mktemp("record")
    store, out = reported(tmp, [result(*c) for c in cells])
    problems = check_run([store], out)
    assert problems == [], "\n".join(problems)
    assert re.search(r"cells ran \(", (out / "compat.md").read_text(encoding="utf-8"))


def test_a_probes_bisect_is_said_under_the_grid_and_checked_against_its_probes_run(
        tmp_path: Path) -> None:
    """A bisect of a probe (the numpy bridge: first in torch 2.1.0 with numpy 2) joins the
    capability grid in compat.md and probes.html; the check reads it back from the probe's
    own run, so a finding its run does not show is caught."""
    from dataclasses import replace

    from harness.records.bisects import BisectRecord, write_bisect

    reports = tmp_path / "reports"
    probe = RunStore.create(reports, {"planned": [], "environments": {}}, run_id="probe",
                            cases=CASES)
    probe.extend([replace(result("2.1.0", "2.4.6", "probes::numpy_bridge", Outcome.PASS),
                          run_id="probe")])
    night = [result("2.0.1", "2.4.6", "probes::numpy_bridge", Outcome.REPRODUCED),
             result("2.2.2", "2.4.6", "probes::numpy_bridge", Outcome.PASS)]
    night = [replace(r, signature="numpy-abi") if r.outcome is Outcome.REPRODUCED else r
             for r in night]
    write_bisect(reports, BisectRecord(
        bisect_id="b", axis="torch", case="probes", variant="numpy_bridge", hardware="cpu",
        origin="cpu", values={"numpy": "2.4.6"}, package="torch",
        last={"version": "2.0.1", "outcome": "REPRODUCED", "signature": "numpy-abi",
              "run_id": "night"},
        first={"version": "2.1.0", "outcome": "PASS", "signature": None, "run_id": "probe"},
        probes=[{"version": "2.1.0", "outcome": "PASS", "signature": None, "run_id": "probe"}],
        untested=[]))
    store = RunStore.create(reports, {"planned": [], "environments": {
        r.environment: {"requirements": [f"torch=={r.values['torch']}", "numpy==2.4.6"],
                        "backend": "uv"} for r in night}}, run_id="night", cases=CASES)
    store.extend(night)
    out = tmp_path / "report"
    write_report([store], out)
    said = ("bisect: first fixed in torch 2.1.0 (last REPRODUCED (numpy-abi): torch 2.0.1; "
            "numpy_bridge @cpu)")
    assert f"- {said}" in (out / "compat.md").read_text(encoding="utf-8").splitlines()
    assert f"<li>{said}</li>" in (out / "probes.html").read_text(encoding="utf-8")
    assert check_run([store], out) == []
    # The probe's run says otherwise: the sentence no longer follows from the record.
    (probe.run_dir / "results.jsonl").write_text(
        (probe.run_dir / "results.jsonl").read_text().replace('"PASS"', '"FAIL"'))
    problems = check_run([store], out)
    assert any(p.startswith("compat.md grid: says 'bisect: first fixed") for p in problems), (
        problems)
    edit(out / "probes.html", "<li>bisect: first fixed", "<li>bisect: first affected")
    assert "probes.html: its bisect findings are not compat.md's" in check_run([store], out)

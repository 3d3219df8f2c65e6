"""The consistency check: a report's model says only what its record holds, and the check can
fail."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.results import CellResult, Outcome
from harness.records.bisects import reports_dir_of
from harness.records.store import RunStore
from harness.report.build import prepare, write_report
from harness.report.check import check, check_report, check_run
from harness.report.data import Report
from harness.report.site.model import Site
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


def reported(tmp_path: Path, results: list[CellResult], previous: RunStore | None = None
             ) -> tuple[RunStore, Path]:
    envs = {r.environment: {"requirements": [f"torch=={r.values['torch']}",
                                             f"numpy=={r.values['numpy']}"],
                            "backend": r.backend} for r in results}
    store = RunStore.create(tmp_path / "reports", {"planned": [], "environments": envs},
                            cases=CASES)
    store.extend(results)
    out = tmp_path / "report"
    write_report([store], out, previous=previous)
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


def model(store: RunStore, out: Path, previous: RunStore | None = None) -> tuple[Report, Site]:
    report = prepare([store], out, previous=previous)
    return report, report.site


def problems_of(report: Report, site: Site) -> list[str]:
    """``check`` of ``site`` (a model changed by hand) against ``report``'s record."""
    return check(site, report.stores[0].results(), report.environments, report.cases,
                 report.previous.results() if report.previous else None, report.moved,
                 reports_dir_of(report.stores[0].run_dir))


def test_a_model_changed_to_contradict_its_record_is_caught(tmp_path: Path) -> None:
    """A changed verdict, count, table cell, grid cell and "what changed" line: each caught."""
    before = RunStore.create(tmp_path / "reports", {"planned": [], "environments": {}},
                             run_id="before", cases=CASES)
    before.extend([r.replace(outcome=Outcome.FAIL) if r.outcome is Outcome.PASS else r
                   for r in MERGEKIT[:4]])
    store, out = reported(tmp_path, MERGEKIT, previous=before)
    report, site = model(store, out, before)
    assert problems_of(report, site) == []
    (mk,) = site.failures
    assert mk.verdict[0] == "affected: torch 2.0.1, 2.1.2"
    verdict = replace(mk, affected=frozenset({"2.0.1"}))
    assert verdict.verdict[0] == "affected: torch 2.0.1"
    assert problems_of(report, replace(site, failures=(verdict,))) == [
        "mk: the verdict says affected ['2.0.1']; the record: ['2.0.1', '2.1.2']"]
    (helps,) = mk.workarounds
    dropped = replace(mk, workarounds=(replace(helps, works=helps.works - {"2.2.2"}),))
    assert problems_of(report, replace(site, failures=(dropped,))) == [
        "mk: the verdict says workarounds {'workaround[bfloat16]': (['2.0.1', '2.1.2'], [])}; "
        "the record: {'workaround[bfloat16]': (['2.0.1', '2.1.2', '2.2.2'], [])}"]

    counts = replace(site.header, counts=tuple((o, n + (o == "PASS"))
                                               for o, n in site.header.counts))
    assert problems_of(report, replace(site, header=counts)) == [
        "the coverage line says counts {'PASS': 6, 'REPRODUCED': 3, 'SKIP': 1, 'NOT_RUN': 1}; "
        "the record: {'REPRODUCED': 3, 'PASS': 5, 'SKIP': 1, 'NOT_RUN': 1}"]

    row = mk.rows[-1]  # torch 2.2.2: its repro passed
    badges = tuple(replace(b, outcome=Outcome.REPRODUCED) if b.variant == "repro" else b
                   for b in row.cells["cpu"])
    table = replace(mk, rows=(*mk.rows[:-1], replace(row, cells={"cpu": badges})))
    (problem,) = problems_of(report, replace(site, failures=(table,)))
    assert problem.startswith(f"mk: {row.environment} @cpu shows {{'repro': 'REPRODUCED'"), problem

    assert site.grid is not None
    variant, about, cells = site.grid.rows[0]
    assert cells["cpu"].missing == ("torch 2.0.1 with numpy 2.4.6",)
    works = replace(cells["cpu"], works=(*cells["cpu"].works, *cells["cpu"].missing), missing=())
    grid = replace(site.grid, rows=((variant, about, {"cpu": works}), *site.grid.rows[1:]))
    (problem,) = problems_of(report, replace(site, grid=grid))
    assert problem.startswith("grid numpy_bridge @cpu: says {'works': "), problem
    sdpa, about, cells = site.grid.rows[1]  # its one cell skipped: untested, said nothing
    grid = replace(site.grid, rows=(site.grid.rows[0], (sdpa, about, {
        "cpu": replace(cells["cpu"], untested=0)})))
    assert problems_of(report, replace(site, grid=grid)) == [
        "grid sdpa[cpu] @cpu: untested (0); the record has 1 cell that said nothing"]

    fixed = next(c for c in site.changes if c["class"] == "fixed")
    changed = [{**c, "after": "FAIL"} if c is fixed else c for c in site.changes]
    (problem,) = problems_of(report, replace(site, changes=tuple(changed)))
    assert problem.startswith("what changed: says fixed ("), problem
    dropped = tuple(c for c in site.changes if c is not fixed)
    assert problems_of(report, replace(site, changes=dropped)) == [
        f"what changed: no line for {(fixed['environment'], fixed['case'], fixed['hardware'])}"
        f": FAIL → PASS"]


def test_the_pages_and_compat_md_say_what_the_checked_model_says(tmp_path: Path) -> None:
    """Every format is rendered from the one model the check reads: its verdict, coverage
    and grid cells are what compat.md, index.html, the failure page and probes.html say."""
    store, out = reported(tmp_path, MERGEKIT)
    _, site = model(store, out)
    md = (out / "compat.md").read_text(encoding="utf-8")
    pages = {name: (out / name).read_text(encoding="utf-8")
             for name in ("index.html", "failure-mk.html", "probes.html")}
    (mk,) = site.failures
    for part in mk.verdict:
        assert part in md
        assert html.escape(part, quote=False) in pages["index.html"]
        assert html.escape(part, quote=False) in pages["failure-mk.html"]
    assert f"{site.header.ran:,} of {site.header.cells:,} cells ran" in md
    assert f"{site.header.ran:,} of {site.header.cells:,} cells ran" in pages["index.html"]
    assert site.grid is not None
    for _, _, cells in site.grid.rows:
        for word, found in cells["cpu"].parts():
            assert f"{word}: {found}" in md
            assert html.escape(f"{word}: {found}", quote=False) in pages["probes.html"]


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
@given(cells=CELLS, before=st.none() | CELLS)
def test_every_generated_record_reports_only_what_it_holds(
        tmp_path_factory: pytest.TempPathFactory,
        cells: list[tuple[str, str, str, Outcome, str, str]],
        before: list[tuple[str, str, str, Outcome, str, str]] | None) -> None:
    """Random outcomes over random axes, probes and cases, against a random run before: the
    check finds no contradiction."""
    tmp = tmp_path_factory.mktemp("record")
    previous = None
    if before is not None:
        previous = RunStore.create(tmp / "reports", {"planned": [], "environments": {}},
                                   run_id="before", cases=CASES)
        previous.extend([result(*c) for c in before])
    store, out = reported(tmp, [result(*c) for c in cells], previous)
    problems = check_run([store], out, previous)
    assert problems == [], "\n".join(problems)
    assert re.search(r"cells ran \(", (out / "compat.md").read_text(encoding="utf-8"))


def test_a_probes_bisect_is_said_under_the_grid_and_checked_against_its_probes_run(
        tmp_path: Path) -> None:
    """A bisect of a probe (the numpy bridge: first in torch 2.1.0 with numpy 2) joins the
    capability grid in compat.md and probes.html; the check reads it back from the probe's
    own run, so a finding its run does not show is caught."""

    from harness.records.bisects import BisectRecord, write_bisect

    reports = tmp_path / "reports"
    probe = RunStore.create(reports, {"planned": [], "environments": {}}, run_id="probe",
                            cases=CASES)
    probe.extend([result("2.1.0", "2.4.6", "probes::numpy_bridge", Outcome.PASS).replace(
                          run_id="probe")])
    night = [result("2.0.1", "2.4.6", "probes::numpy_bridge", Outcome.REPRODUCED),
             result("2.2.2", "2.4.6", "probes::numpy_bridge", Outcome.PASS)]
    night = [r.replace(signature="numpy-abi") if r.outcome is Outcome.REPRODUCED else r
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
    assert problems == [f"grid: says {said!r}, which no bisect of probes shows in its probes' "
                        "runs"]


def test_where_packages_built_from_source_came_from_is_said_and_checked(tmp_path: Path) -> None:
    took = "tinyext 1.0 from the wheel folder (key tinyext-1.0-e1db90aa188b71d6)"
    results = [r.replace(fingerprint={**r.fingerprint, "provenance": [took]})
               if r.values["torch"] == "2.0.1" else r for r in MERGEKIT]
    store, out = reported(tmp_path, results)
    assert check_run([store], out) == []
    report, site = model(store, out)
    env = "uv:torch=2.0.1,numpy=1.26.4"
    assert dict(site.provenance) == {env: (took,), "uv:torch=2.0.1,numpy=2.4.6": (took,)}
    assert f"- `{env}`: {took}" in (out / "compat.md").read_text()
    assert f"<li><code>{env}</code>: {took}</li>" in (out / "index.html").read_text()
    dropped = replace(site, provenance=site.provenance[1:])
    (problem,) = problems_of(report, dropped)
    assert problem.startswith("the report says packages came from {"), problem
    # A report of environments that built nothing from source says nothing of it.
    store, out = reported(tmp_path / "plain", MERGEKIT)
    assert "Where environments came from" not in (out / "compat.md").read_text()


def test_an_interrupted_run_says_no_cell_it_did_not_run_is_gone(tmp_path: Path) -> None:
    """Ctrl-C after its first cell: the report said 'gone' of the cell never started, and
    '1 of 1 cells ran'."""
    cells = MERGEKIT[:2]
    plan = [{"cell_id": r.cell_id, "environment": r.environment, "values": r.values,
             "backend": r.backend, "case": r.case_id, "variant": r.variant,
             "nodeid": r.nodeid, "hardware": r.hardware_target} for r in cells]
    for run_id, ran in (("night1", cells), ("night2", cells[:1])):
        RunStore.create(tmp_path / "reports", {"planned": plan}, run_id=run_id,
                        cases=CASES).extend(ran)
    report = prepare([RunStore(tmp_path / "reports" / "runs" / "night2")], tmp_path / "out",
                     since_in=tmp_path / "reports")
    assert report.since == "night1" and report.changes() == []
    assert (report.site.header.ran, report.site.header.cells) == (1, 2)
    assert check_report(report) == []

"""history.html: each cell of a report over the last runs of its line (same matrix, nightly),
from real run folders reported as ``harness run`` reports them."""

from __future__ import annotations

import hashlib
import html
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.results import CellResult, CellRun, Outcome
from harness.records import reportinput
from harness.records.history import History
from harness.records.store import RunStore
from harness.report.build import write_report
from harness.report.site import history_page
from harness.report.site.model import build_site
from harness.report.site.render import render_site

P, F, R, E = Outcome.PASS, Outcome.FAIL, Outcome.REPRODUCED, Outcome.ERROR
CASES = {"mk::repro": {"case": "mk", "variant": "repro", "failure": "addmm on Half",
                       "signatures": [{"name": "addmm-half"}]},
         "mk::workaround": {"case": "mk", "variant": "workaround", "failure": "addmm on Half"}}
ODD = '<b>t&"x</b>'


def result(run_id: str, env: str, variant: str, outcome: Outcome, hardware: str = "cpu"
           ) -> CellResult:
    return CellResult(run_id=run_id, cell_id=hashlib.sha256(
                          f"{env} {variant} {hardware}".encode()).hexdigest()[:12], environment=env,
                      values={}, env_key="k", backend="uv", case_id="mk", variant=variant,
                      nodeid="n", hardware_target=hardware, outcome=outcome,
                      fingerprint={"key": {"torch": "2.1"}})


def make_run(reports: Path, run_id: str, created: float,
             outcomes: dict[tuple[str, str], Outcome], *, matrix: str = "matrix.yaml",
             report: bool = True, **meta: object) -> RunStore:
    """A run folder as ``harness run`` leaves it (its report too, unless not ``report``),
    created at ``created``."""
    envs = {env for env, _ in outcomes}
    store = RunStore.create(reports, {
        "planned": [], "harness": "0.1.0", "matrix_sha256": "abc", "matrix": matrix,
        "environments": {e: {"requirements": ["torch==2.1"], "backend": "uv"} for e in envs},
        **meta}, run_id=run_id, cases=CASES)
    run_json = store.run_dir / "run.json"
    run_json.write_text(json.dumps({**json.loads(run_json.read_text()), "created": created}))
    for (env, variant), outcome in outcomes.items():
        store.record(CellRun(result=result(run_id, env, variant, outcome), log=b"log\n"))
    if report:
        write_report(store, store.run_dir / "report")
    return RunStore(store.run_dir)


def rows(page: str) -> dict[tuple[str, str], dict[str, object]]:
    """Each row of history.html: (environment, variant) -> its squares' classes, their
    titles, the flaky mark, what its last column says."""
    found = {}
    for env, variant, strip, flaky, changed in re.findall(
            r'<tr><th class="row">(.*?)</th><td>(.*?)</td><td>.*?</td>'
            r'<td class="strip">(.*?)</td><td>(.*?)</td><td class="changed">(.*?)</td></tr>',
            page):
        found[(html.unescape(env), html.unescape(variant))] = {
            "colours": re.findall(r'<span class="([^"]+)"', strip),
            "titles": [html.unescape(t) for t in re.findall(r'title="([^"]*)"', strip)],
            "flaky": "flaky" in flaky, "changed": changed}
    return found


NIGHTS = [  # (env, variant) -> outcome, one dict a night, oldest first
    {("t-a", "repro"): R, ("t-a", "workaround"): P, ("t-b", "repro"): P},
    {("t-a", "repro"): R, ("t-a", "workaround"): F, ("t-b", "repro"): P},
    {("t-a", "repro"): P, ("t-a", "workaround"): P, ("t-b", "repro"): P},
    {("t-a", "repro"): P, ("t-a", "workaround"): F, ("t-b", "repro"): P,
     ("t-c", "repro"): E},
]


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    """Four nightly runs of matrix.yaml (the second without a report), with a bump, a
    bisect's trial and a run of another matrix between them, and a nightly after them."""
    reports = tmp_path / "reports"
    make_run(reports, "n1", 100.0, NIGHTS[0])
    make_run(reports, "n2", 200.0, NIGHTS[1], report=False)
    make_run(reports, "bump", 250.0, {("t-a", "repro"): F, ("t-b", "repro"): F},
             kind="bump", set={"torch": "2.9"})
    make_run(reports, "trial", 260.0, {("t-a", "repro"): F}, kind="trial")
    make_run(reports, "other", 270.0, {("t-a", "repro"): E}, matrix="other.yaml")
    make_run(reports, "n3", 300.0, NIGHTS[2])
    make_run(reports, "n4", 400.0, NIGHTS[3])
    make_run(reports, "n5", 500.0, {("t-a", "repro"): F})  # after the run reported
    return reports


def test_the_page_shows_the_nightly_line_up_to_the_run_each_strip_in_order(
        reports: Path) -> None:
    page = (reports / "runs" / "n4" / "report" / "history.html").read_text()
    runs = re.search(r'<ol id="runs">(.*?)</ol>', page, re.S)
    assert runs is not None
    assert re.findall(r"<li>(?:<a [^>]+>)?([\w-]+)", runs[1]) == ["n1", "n2", "n3", "n4"]
    assert "3 earlier runs of other matrices or kinds" in page
    found = rows(page)
    assert found[("t-a", "repro")]["colours"] == [
        "o-reproduced", "o-reproduced", "o-pass", "o-pass"]
    assert found[("t-a", "repro")]["titles"] == [
        "n1: REPRODUCED", "n2: REPRODUCED", "n3: PASS", "n4: PASS"]
    assert found[("t-b", "repro")]["colours"] == ["o-pass"] * 4
    # A cell new tonight: absent from the runs before (a dashed square each).
    assert found[("t-c", "repro")]["colours"] == ["absent", "absent", "absent", "o-error"]
    # Each row under its case, linked to its page, as the index lists the case.
    assert '<h2><a href="failure-mk.html">mk</a></h2>' in page
    index = (reports / "runs" / "n4" / "report" / "index.html").read_text()
    assert '<a href="history.html">history</a>' in index


def test_flaky_cells_are_marked_and_each_shows_the_run_it_first_changed_in(
        reports: Path) -> None:
    found = rows((reports / "runs" / "n4" / "report" / "history.html").read_text())
    flip = found[("t-a", "workaround")]  # P F P F
    assert flip["flaky"] and not found[("t-a", "repro")]["flaky"]
    assert not found[("t-b", "repro")]["flaky"]
    # First changed in n2, which has no report: its id and date, no link.
    assert flip["changed"] == "n2 · 1970-01-01 00:03"
    # R R P P: first changed in n3, linked to n3's report from this one.
    assert found[("t-a", "repro")]["changed"] == (
        '<a href="../../n3/report/index.html">n3</a> · 1970-01-01 00:05')
    assert found[("t-b", "repro")]["changed"] == "—"
    assert found[("t-c", "repro")]["changed"] == "—"


def test_a_run_with_no_run_before_it_gets_a_page_of_one_column(tmp_path: Path) -> None:
    store = make_run(tmp_path, "first", 100.0, NIGHTS[0])
    found = rows((store.run_dir / "report" / "history.html").read_text())
    assert found[("t-a", "repro")]["colours"] == ["o-reproduced"]
    assert found[("t-a", "repro")]["changed"] == "—"
    assert len(found) == 3


def test_odd_names_stay_text(tmp_path: Path) -> None:
    store = make_run(tmp_path, "first", 100.0, {(ODD, "repro"): P, ("t-a", ODD): F})
    page = (store.run_dir / "report" / "history.html").read_text()
    assert "<b>" not in page
    assert {(ODD, "repro"), ("t-a", ODD)} <= set(rows(page))


def test_past_max_rows_only_the_cells_that_changed_last_get_a_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [result("n3", "t-a", "repro", P), result("n3", "t-a", "workaround", P),
           result("n3", "t-b", "repro", P), result("n3", "t-b", "workaround", Outcome.FLAKY)]
    earlier = History(folder=Path("runs"), runs=("n1", "n2"), cells={
        ("t-a", "mk::repro", "cpu"): (R, R), ("t-a", "mk::workaround", "cpu"): (F, P),
        ("t-b", "mk::repro", "cpu"): (P, P),
        ("t-b", "mk::workaround", "cpu"): (Outcome.FLAKY, Outcome.FLAKY)})
    site = build_site(now, {}, CASES, [{"run_id": "n3"}], {})
    runs = [history_page.Run(run_id=f"n{i}", date="", link="") for i in (1, 2, 3)]

    def shown(limit: int) -> tuple[list[tuple[str, str, int | None]], int, int]:
        monkeypatch.setattr(history_page, "MAX_ROWS", limit)
        page = history_page.page(now, site, earlier, runs)
        return ([(c.environment, c.variant, c.changed) for g in page.groups for c in g.cells],
                page.steady, page.older)

    assert shown(4) == ([("t-a", "repro", 2), ("t-a", "workaround", 1), ("t-b", "repro", None),
                         ("t-b", "workaround", None)], 0, 0)
    # Past the limit: the steady cell counted; the flaky one (never changed) kept while
    # there is room.
    assert shown(3) == ([("t-a", "repro", 2), ("t-a", "workaround", 1),
                         ("t-b", "workaround", None)], 1, 0)
    assert shown(2) == ([("t-a", "repro", 2), ("t-a", "workaround", 1)], 1, 1)
    assert shown(1) == ([("t-a", "repro", 2)], 1, 2)  # changed in the newest run: kept


def test_the_rest_of_the_site_is_the_same_but_for_the_nav_link(reports: Path,
                                                                tmp_path: Path) -> None:
    """Rendered with and without the history page: every other file is the same bytes,
    the nav's link to history.html apart."""
    store = RunStore(reports / "runs" / "n4")
    results = store.results()
    site = build_site(results, store.meta["environments"], CASES, [store.meta], {})
    page = history_page.load(results, site, reportinput.read(store).earlier, tmp_path / "with",
                             ["n4"])
    render_site(site, tmp_path / "with", [], [], page)
    render_site(replace(site), tmp_path / "without", [], [])
    with_page = {p.name: p.read_bytes() for p in (tmp_path / "with").iterdir()}
    without = {p.name: p.read_bytes() for p in (tmp_path / "without").iterdir()}
    assert with_page.keys() - without.keys() == {"history.html"}
    link = b'<a href="history.html">history</a>'
    for name, data in without.items():
        if name.endswith(".html"):
            assert data.count(b"<nav") == 1 and link in with_page[name], name
        assert with_page[name].replace(link, b"") == data, name

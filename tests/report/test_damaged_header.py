"""The report header's count of a record's damaged lines (``records.store.Damaged``): said after
the cells that ran, in the site, its markdown and the summary; nothing for none."""

from __future__ import annotations

from harness.core.results import CellResult, Outcome
from harness.report.check import check
from harness.report.site.model import build_site
from harness.report.site.render import markdown, summary_text


def cell(cell_id: str) -> CellResult:
    return CellResult(run_id="r", cell_id=cell_id, environment="e", values={}, env_key="k",
                      backend="uv", case_id="c", variant="v", nodeid="n",
                      hardware_target="cpu", outcome=Outcome.PASS)


def test_the_header_counts_the_damaged_lines_left_out() -> None:
    meta = [{"run_id": "r", "created": 0}]
    for damaged, said in ((0, ""), (1, "; 1 damaged line left out"),
                          (3, "; 3 damaged lines left out")):
        site = build_site([cell("a")], {}, {}, meta, {}, damaged=damaged)
        coverage = "tested: cpu — 1 of 1 cells ran (1 PASS)" + said
        assert coverage in markdown(site).splitlines(), damaged
        assert summary_text(site).splitlines()[1] == coverage, damaged


def test_an_interrupted_run_counts_the_cells_it_planned() -> None:
    """Interrupted after 1 of its 3 cells, a run's report said '1 of 1 cells ran'."""
    site = build_site([cell("a")], {}, {}, [{"run_id": "r", "created": 0, "cells": 3}], {})
    assert summary_text(site).splitlines()[1] == "tested: cpu — 1 of 3 cells ran (1 PASS)"
    assert check(site, [cell("a")], {}, {}, planned=3) == []
    assert check(site, [cell("a")], {}, {}) == [
        "the coverage line says cells 3; the record: 1"]


def test_cells_whose_shard_never_reported_did_not_run() -> None:
    """A merge whose sm_90 shard was lost said 'tested: cpu, sm_90 — 2 of 2 cells ran'."""
    lost = cell("b").replace(hardware_target="sm_90", outcome=Outcome.MISSING)
    site = build_site([cell("a"), lost], {}, {}, [{"run_id": "r", "created": 0}], {})
    assert summary_text(site).splitlines()[1].startswith(
        "tested: cpu; not tested: sm_90 — 1 of 2 cells ran (1 PASS, 1 MISSING)"), summary_text(site)
    assert site.header.not_tested == ("sm_90",)
    assert "v works on every tested version" in summary_text(site)  # said 'fails on e' too
    assert check(site, [cell("a"), lost], {}, {}) == []

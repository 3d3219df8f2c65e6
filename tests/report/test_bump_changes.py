"""A bump's "what changed": the row it replaced, with how many of its cells kept their
outcome, then only the cells whose outcome moved (not a "versions changed" line per cell)."""

from __future__ import annotations

from harness.core.results import CellResult, Outcome
from harness.report.build import diff_runs
from harness.report.site.model import Header, Site
from harness.report.site.render import summary_text


def row(torch: str, variant: str, outcome: Outcome) -> CellResult:
    return CellResult(run_id="r", environment=f"cpu:torch={torch}", case_id="probe",
                      variant=variant, hardware_target="cpu", cell_id=f"{torch}-{variant}",
                      outcome=outcome, duration=1.0, values={"torch": torch}, env_key="k",
                      backend="uv", nodeid="n", fingerprint={"key": {"torch": torch}})


def site(changes: list[dict[str, object]], sets: tuple[str, ...]) -> Site:
    header = Header(run_ids=("bump",), date="today", harness="1", matrix_sha256="", machines=(),
                    tested=("cpu",), not_tested=(), ran=3, cells=3, counts=(), sets=sets)
    return Site(header=header, failures=(), grid=None, unbuildable=(),
                changes=tuple(changes), since="night")


def test_a_bump_says_the_row_it_replaced_and_lists_only_outcomes_that_moved() -> None:
    night = [row("2.5.1", v, Outcome.PASS) for v in ("a", "b", "c")]
    bump = [row("2.6.0", "a", Outcome.PASS), row("2.6.0", "b", Outcome.PASS),
            row("2.6.0", "c", Outcome.FAIL)]
    changes = diff_runs(night, bump, ("torch",))
    assert {c["replaced"] for c in changes} == {"cpu:torch=2.5.1"}
    text = summary_text(site(changes, ("torch=2.6.0",)))
    part = text[text.index("## Changes since"):]
    assert part == (
        "## Changes since night: 1 outcome moved\n"
        "- replaced: cpu:torch=2.5.1 -> cpu:torch=2.6.0 (3 cells compared, 2 kept their "
        "outcome)\n"
        "- new failure: cpu:torch=2.6.0 probe::c @cpu: PASS -> FAIL [torch 2.5.1 -> 2.6.0]\n")


def test_a_run_that_is_not_a_bump_lists_its_changes_as_before() -> None:
    night = [row("2.5.1", "a", Outcome.PASS)]
    again = [row("2.5.1", "a", Outcome.FAIL)]
    changes = diff_runs(night, again)
    assert "replaced" not in changes[0]
    text = summary_text(site(changes, ()))
    assert text.endswith("## Changes since night: 1\n- new failure: cpu:torch=2.5.1 probe::a "
                         "@cpu: PASS -> FAIL\n")

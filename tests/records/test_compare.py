"""Which earlier cell a cell is compared with: the same one, or, for a --set bump, the one
the bump replaced."""

from __future__ import annotations

from harness.core.results import CellResult, Outcome
from harness.records.compare import bumped, match_previous, new_releases, pinned_releases
from harness.records.snapshot import rows_of
from harness.report.build import diff_runs
from harness.report.ci import status_badge, step_summary


def cell(torch: str, numpy: str, variant: str, outcome: Outcome) -> CellResult:
    env = f"cpu:torch={torch},numpy{numpy}"
    return CellResult(run_id="r", cell_id=f"{env}/{variant}", environment=env,
                      values={"torch": torch, "numpy": numpy}, env_key=env, backend="uv",
                      case_id="probes", variant=variant, nodeid=f"t.py::{variant}",
                      hardware_target="cpu", outcome=outcome,
                      fingerprint={"key": {"torch": torch}})


NIGHT = [cell(t, n, "numpy_bridge", o) for t, n, o in (
    ("2.0.1", ">=2", Outcome.REPRODUCED), ("2.5.1", ">=2", Outcome.PASS),
    ("2.2.2", ">=2", Outcome.REPRODUCED), ("2.5.1", "<2", Outcome.PASS))]


def test_a_bump_is_compared_with_the_newest_release_it_replaced() -> None:
    bump = [cell("2.6.0", ">=2", "numpy_bridge", Outcome.FAIL),
            cell("2.6.0", "<2", "numpy_bridge", Outcome.PASS),
            cell("2.6.0", "<2", "new_probe", Outcome.PASS)]
    paired = match_previous(NIGHT, bump, ("torch",))
    assert {k[0]: v.environment for k, v in paired.items()} == {
        "cpu:torch=2.6.0,numpy>=2": "cpu:torch=2.5.1,numpy>=2",
        "cpu:torch=2.6.0,numpy<2": "cpu:torch=2.5.1,numpy<2"}
    changes = diff_runs(rows_of(NIGHT), rows_of(bump), ("torch",))
    assert [(c["class"], c["environment"], c["before"], c["after"]) for c in changes] == [
        ("new failure", "cpu:torch=2.6.0,numpy>=2", "PASS", "FAIL"),
        ("versions changed", "cpu:torch=2.6.0,numpy<2", "PASS", "PASS"),
        ("new cell", "cpu:torch=2.6.0,numpy<2", "", "PASS")]  # nothing "gone"
    assert changes[0]["versions"] == {"torch": "2.5.1 -> 2.6.0"}
    # Without the bump's keys, nothing matches: every cell is new, every old one gone.
    assert {c["class"] for c in diff_runs(rows_of(NIGHT), rows_of(bump))} == {"new cell", "gone"}


def test_bumped_keys_come_from_the_records() -> None:
    assert bumped([{"set": {"torch": "2.6.0"}}, {"set": {}}, {}]) == ("torch",)


def test_a_release_new_to_a_query_is_named_with_how_its_cells_did() -> None:
    def meta(*versions: str) -> dict[str, object]:
        return {"releases": [{"text": "torch>=2.0 pick=latest-patch", "python": "3.11",
                              "query": {"dist": "torch"}, "versions": list(versions)}]}
    assert new_releases(meta("2.5.1", "2.6.0"), meta("2.5.1")) == [("torch", "2.6.0")]
    assert new_releases(meta("2.5.1"), None) == []
    results = [cell("2.6.0", ">=2", "numpy_bridge", Outcome.FAIL),
               cell("2.6.0", "<2", "numpy_bridge", Outcome.PASS),
               cell("2.5.1", "<2", "numpy_bridge", Outcome.PASS),
               # another package's 2.6.0 is not torch's: not one of torch 2.6.0's cells
               cell("2.5.1", "==2.6.0", "numpy_bridge", Outcome.FAIL)]
    pins = pinned_releases({r.environment: {"requirements": [
        f"torch=={r.values['torch']}", f"numpy{r.values['numpy']}", "Typing_Extensions==4.1",
        "not a requirement ==="]} for r in results})
    assert pins["cpu:torch=2.5.1,numpy==2.6.0"] == {
        ("torch", "2.5.1"), ("numpy", "2.6.0"), ("typing-extensions", "4.1")}
    summary = step_summary("n2", results, [], "n1", [("torch", "2.6.0")], pins)
    assert "- new: torch 2.6.0 — 1 of 2 cells fail" in summary
    badge = status_badge(results[:3], [{"class": "new failure"}], "n1")
    assert badge == {"schemaVersion": 1, "label": "compatibility",
                     "message": "2/3 as documented, 1 new failure", "color": "red"}

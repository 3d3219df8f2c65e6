"""harness/report/ci.py as the nightly's merge job uses it: the badge of a merged run."""

from __future__ import annotations

from harness.core.results import CellResult, Outcome
from harness.report.ci import status_badge


def cell(n: int, outcome: Outcome) -> CellResult:
    return CellResult(run_id="night", cell_id=f"c{n}", environment=f"host{n}", values={},
                      env_key="", backend="host", case_id="behaviour", variant="pass",
                      nodeid="t.py::t", hardware_target="cpu", outcome=outcome)


def test_a_badge_of_cells_whose_shard_never_reported_is_not_green() -> None:
    """Every shard lost on the first night (no run before to find news against) read
    "0/0 as documented", green; one lost, "3/3 as documented", green."""
    lost = [cell(n, Outcome.MISSING) for n in range(4)]
    assert status_badge(lost, [], None) == {"schemaVersion": 1, "label": "compatibility",
                                            "message": "0/0 as documented, 4 MISSING",
                                            "color": "yellow"}
    some = [cell(n, Outcome.PASS) for n in range(3)] + lost[3:]
    assert status_badge(some, [], "yesterday")["message"] == "3/3 as documented, 1 MISSING"
    assert status_badge(some[:3], [], "yesterday")["color"] == "green"

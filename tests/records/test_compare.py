"""Which earlier cell a cell is compared with: the same one, or, for a --set bump, the one
the bump replaced."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.compare import bumped, match_previous, new_releases, pinned_releases
from harness.records.store import RunStore
from harness.report.build import diff_pairs, diff_runs
from harness.report.ci import status_badge, step_summary
from tests.conftest import examples


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
    changes = diff_runs(NIGHT, bump, ("torch",))
    assert [(c["class"], c["environment"], c["before"], c["after"]) for c in changes] == [
        ("new failure", "cpu:torch=2.6.0,numpy>=2", "PASS", "FAIL"),
        ("versions changed", "cpu:torch=2.6.0,numpy<2", "PASS", "PASS"),
        ("new cell", "cpu:torch=2.6.0,numpy<2", "", "PASS")]  # nothing "gone"
    assert changes[0]["versions"] == {"torch": "2.5.1 -> 2.6.0"}
    # Without the bump's keys, nothing matches: every cell is new, every old one gone.
    assert {c["class"] for c in diff_runs(NIGHT, bump)} == {"new cell", "gone"}


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


OUTCOMES = st.sampled_from(list(Outcome))


@st.composite
def two_nights(draw: st.DrawFn) -> tuple[list[CellResult], list[CellResult]]:
    """Two runs of the same cells in the same order (most nightlies), or now and then not:
    each cell's outcome and versions drawn for each night, a fingerprint missing, a
    logical key twice, labels that read as one ("a::b" + "c", "a" + "b::c"), a cell more."""
    keys = draw(st.lists(st.tuples(st.sampled_from(["e1", "e2", "e,3"]),
                                   st.sampled_from([("a", "b::c"), ("a::b", "c"), ("a", "x")]),
                                   st.sampled_from(["cpu", "sm_90"])),
                         min_size=0, max_size=12))
    nights = []
    for _ in range(2):
        night = []
        for i, (env, (case, variant), hw) in enumerate(keys):
            torch = draw(st.sampled_from(["", "2.5.1", "2.6.0"]))
            # now and then a hand-written axis value: 1, 1.0 and true are equal in Python
            flag = draw(st.sampled_from(["on", "on", "on", 1, 1.0, True]))
            night.append(CellResult(
                run_id="r", cell_id=f"c{i}", environment=env,
                values={"torch": torch or "x", "flag": flag},  # type: ignore[dict-item]
                env_key=env, backend="uv", case_id=case, variant=variant, nodeid="t.py::t",
                hardware_target=hw, outcome=draw(OUTCOMES),
                fingerprint={"key": {"torch": torch}} if torch else {}))
        nights.append(night)
    if keys and draw(st.booleans()):
        nights[1].append(replace(nights[1][0], cell_id="more", hardware_target="sm_80"))
    return nights[0], nights[1]


@settings(max_examples=examples(100), deadline=None)
@given(nights=two_nights(), moved=st.sampled_from([(), ("torch",)]))
def test_what_changed_off_the_run_befores_table_is_what_its_results_say(
        tmp_path_factory: pytest.TempPathFactory,
        nights: tuple[list[CellResult], list[CellResult]], moved: tuple[str, ...]) -> None:
    """The run before read back from its table (``records.table``, as a report reads it)
    changes nothing of what changed: as its results in memory say, hand-written axis
    values, missing fingerprints and keys twice included."""
    store = RunStore.create(tmp_path_factory.mktemp("runs"), {})
    store.extend(nights[0])
    before = table.read(store.run_dir).rows()
    assert diff_runs(before, nights[1], moved) == diff_runs(
        store.results(), nights[1], moved)


@settings(max_examples=examples(100), deadline=None)
@given(nights=two_nights())
def test_what_changed_off_the_two_tables_is_what_the_rows_say(
        tmp_path_factory: pytest.TempPathFactory,
        nights: tuple[list[CellResult], list[CellResult]]) -> None:
    """``table.changed`` (in SQL, place by place, where the keys are the same, in order, each
    once) gives what ``diff_runs`` of the two runs' rows says, or leaves it to that (None):
    every nightly of the same cells is compared that way."""
    stores = []
    for night in nights:
        store = RunStore.create(tmp_path_factory.mktemp("runs"), {})
        store.extend(night)
        table.read(store.run_dir)
        stores.append(store)
    pairs = table.changed(stores[0].run_dir, stores[1].run_dir)
    want = diff_runs(stores[0].results(), stores[1].results())
    if pairs is not None:
        assert diff_pairs(pairs) == want
    keys = [r.logical_key for r in nights[1]]
    pairs_of_labels = {(r.case_id, r.variant) for r in nights[1]}
    if [r.logical_key for r in nights[0]] == keys and len(set(keys)) == len(keys) and len(
            {"::".join(p) for p in pairs_of_labels}) == len(pairs_of_labels):
        assert pairs is not None

"""A merged run's snapshot gathered from its shards' own (``snapshot._gathered``): the
document made from the merged lines, byte for byte, whatever the shards hold."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.core.results import Outcome
from harness.records import snapshot
from harness.records.merge import merge_runs
from harness.records.snapshot import SNAPSHOT
from harness.records.store import RunStore
from tests.conftest import examples
from tests.records.test_merge_verbatim import (
    CELLS,
    add_line,
    assert_snapshot_as_from_the_lines,
    record,
    result,
)


def test_a_merges_snapshot_from_its_shards_is_the_one_made_from_its_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards that end with their snapshot (as every run does): the merged run's snapshot is
    gathered from theirs, and is the file a reader makes from the merged record. Cells that
    bring their own values: a shard without a snapshot (it died), one whose snapshot went
    stale (a line added after), a gap, a line whose log did not come along."""
    reports = tmp_path / "shards"
    layout = ((CELLS[:4], "snapshot"), (CELLS[4:8], "snapshot"), (CELLS[8:10], None),
              (CELLS[10:11], "stale"), (CELLS[11:], "gap"))
    stores = []
    for i, (cells, ends) in enumerate(layout):
        store = RunStore.create(reports, {"planned": cells, "full_plan": CELLS,
                                          "shard": f"{i + 1}/{len(layout)}"}, run_id=f"s{i}")
        for n, cell in enumerate(cells if ends != "gap" else []):
            record(store, result(cell, store.run_id,
                                 (Outcome.PASS, Outcome.FAIL, Outcome.SKIP)[n % 3],
                                 signature="sig" if n % 3 == 1 else None, duration=n + 0.5))
        if ends in ("snapshot", "stale"):
            snapshot.load(store.run_dir)
        if ends == "stale":
            record(store, result(cells[0], store.run_id, Outcome.PASS, attempt=2))
        stores.append(store)
    next((stores[1].run_dir / "logs").iterdir()).unlink()  # a log lost on the way
    with monkeypatch.context() as patched:  # the shards' snapshots or nothing
        patched.setattr(snapshot, "_document", lambda *_: pytest.fail("made from the lines"))
        args = ["--reports", str(tmp_path), "merge", *(str(s.run_dir) for s in stores),
                "--run-id", "m", "--no-report"]
        assert main(args) == 1  # (a FAIL nobody expected)
    merged = tmp_path / "runs" / "m"
    gathered = (merged / SNAPSHOT).read_bytes()
    (merged / SNAPSHOT).unlink()
    assert snapshot.load(merged).cell_ids == [c["cell_id"] for c in CELLS]
    assert (merged / SNAPSHOT).read_bytes() == gathered
    assert "?" in snapshot.letters(merged).letters  # (the gap)


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.tuples(st.sampled_from([0, 1, 2] * 3 + [-1]), st.sampled_from(Outcome),
                                st.sampled_from(["line"] * 6 + ["inline", "no log", "retried"])),
                      min_size=12, max_size=12),
       ends=st.lists(st.sampled_from(["snapshot"] * 3 + ["stale", "none"]), min_size=3,
                     max_size=3))
def test_a_snapshot_gathered_from_shards_is_the_one_made_from_the_lines(
        tmp_path_factory: pytest.TempPathFactory, cells: list[tuple[int, Outcome, str]],
        ends: list[str]) -> None:
    """Any cells of three shards (-1: none ran it), each shard ending with its snapshot, or
    one gone stale, or none: the merged snapshot gathered from theirs is the document made
    from the merged lines; gathered wherever they stand for every cell."""
    tmp = tmp_path_factory.mktemp("gather")
    stores = [RunStore.create(tmp / "shards", {
        "planned": [c for c, (s, _, _) in zip(CELLS, cells, strict=True) if s == n],
        "full_plan": CELLS, "shard": f"{n + 1}/3"}, run_id=f"s{n}") for n in range(3)]
    for cell, (n, outcome, how) in zip(CELLS, cells, strict=True):
        if n < 0:
            continue
        res = result(cell, stores[n].run_id, outcome, duration=1.5,
                     signature="sig" if outcome is Outcome.REPRODUCED else None)
        if how == "inline":
            add_line(stores[n], res.to_dict())
        else:
            record(stores[n], res, log=how != "no log")
            if how == "retried":
                record(stores[n], replace(res, attempt=2, outcome=Outcome.PASS))
    for store, end in zip(stores, ends, strict=True):
        if end != "none":
            snapshot.load(store.run_dir)
        if end == "stale":
            add_line(store, b"\n")
    merged = merge_runs(stores, tmp, run_id="m", make_results=False)
    assert merged.gathering is not None
    gathered = assert_snapshot_as_from_the_lines(merged)
    if set(ends) == {"snapshot"} and all(n >= 0 and how != "inline" for n, _, how in cells):
        assert gathered is not None


def shards_that_ran_everything(reports: Path) -> list[RunStore]:
    """Three shards that each ran their cells and ended with their snapshot."""
    stores = []
    for n in range(3):
        cells = CELLS[n * 4:(n + 1) * 4]
        store = RunStore.create(reports, {"planned": cells, "full_plan": CELLS,
                                          "shard": f"{n + 1}/3"}, run_id=f"s{n}")
        for i, cell in enumerate(cells):
            record(store, result(cell, store.run_id, (Outcome.PASS, Outcome.SKIP)[i % 2],
                                 duration=i + 0.25))
        snapshot.load(store.run_dir)
        stores.append(store)
    return stores


def test_a_merge_whose_cells_all_passed_through_writes_the_snapshot_made_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cell a line passed through from a shard that ended with its snapshot: the one
    made from theirs while the shards were read is written as it is (nothing gathered or
    made after the merge), and it is the file a reader makes from the merged record."""
    stores = shards_that_ran_everything(tmp_path / "shards")
    with monkeypatch.context() as patched:
        for made_after in ("_gathered", "_document"):
            patched.setattr(snapshot, made_after, lambda *_: pytest.fail("made after"))
        assert main(["--reports", str(tmp_path), "merge", *(str(s.run_dir) for s in stores),
                     "--run-id", "m", "--no-report"]) == 0
    merged = tmp_path / "runs" / "m"
    written = (merged / SNAPSHOT).read_bytes()
    (merged / SNAPSHOT).unlink()
    assert snapshot.load(merged).cell_ids == [c["cell_id"] for c in CELLS]
    assert (merged / SNAPSHOT).read_bytes() == written


def test_the_snapshot_made_beside_the_reading_is_taken_only_for_what_it_was_made_of(
        tmp_path: Path) -> None:
    """``Gathering.ready``: not where a line was written otherwise, a cell says another
    outcome, or a shard's record was read as another than its snapshot was made from (it
    grew in between)."""
    stores = shards_that_ran_everything(tmp_path / "shards")
    merged = merge_runs(stores, tmp_path, run_id="m", make_results=False)
    gathering = merged.gathering
    assert gathering is not None and gathering.prepared is not None and gathering.ready
    assert not replace(gathering, own=[3]).ready
    assert not replace(gathering, letters="F" + gathering.letters[1:]).ready
    grown = {**gathering.read_as, stores[1].run_dir: (1, 2)}
    assert not replace(gathering, read_as=grown).ready
    # A line added after the shard's end: its snapshot is stale, none is made beside.
    record(stores[2], result(CELLS[8], "s2", Outcome.FAIL, attempt=2))
    again = merge_runs(stores, tmp_path, run_id="m2", make_results=False)
    assert again.gathering is not None and again.gathering.prepared is None
    assert not again.gathering.ready


def test_values_written_otherwise_in_a_shards_own_order_are_read_from_the_lines(
        tmp_path: Path) -> None:
    """A hand-written record's values that are equal yet written otherwise (1 and True), its
    lines in another order than the plan's: a shard's table kept the first in its own order,
    the merged snapshot keeps the first in the plan's. Such a shard's snapshot stands for
    none of its lines; and one whose tables cannot be told apart (a list inside a mapping)
    breaks nothing: the merged snapshot is the one made from the lines, byte for byte."""
    stores = shards_that_ran_everything(tmp_path / "shards")
    odd = stores[1]
    rows = [json.loads(line) for line in (odd.run_dir / "results.jsonl").read_bytes().splitlines()]
    rows[2]["values"] = {"torch": 1}
    rows[0]["values"] = {"torch": True}
    rows[0]["environment"] = rows[2]["environment"]
    (odd.run_dir / "results.jsonl").write_text("".join(
        json.dumps(r) + "\n" for r in reversed(rows)))
    snapshot.load(odd.run_dir)
    merged = merge_runs(stores, tmp_path, run_id="m", make_results=False)
    assert merged.gathering is not None and not merged.gathering.ready
    assert assert_snapshot_as_from_the_lines(merged) is not None
    # A snapshot edited by hand, still whole as read checks it: a list in a mapping.
    path = stores[0].run_dir / SNAPSHOT
    path.write_bytes(path.read_bytes().replace(b'"torch":"2.0.0"', b'"torch":["2.0.0"]', 1))
    assert snapshot.read(stores[0].run_dir) is not None
    again = merge_runs(stores, tmp_path, run_id="m", make_results=False)
    assert again.gathering is not None
    assert_snapshot_as_from_the_lines(again)


def test_a_cell_no_plan_names_keeps_the_prepared_snapshot_out(tmp_path: Path) -> None:
    stores = shards_that_ran_everything(tmp_path / "shards")
    stray = {**CELLS[0], "cell_id": "zz-stray"}
    record(stores[0], result(stray, "s0", Outcome.PASS))
    snapshot.load(stores[0].run_dir)
    merged = merge_runs(stores, tmp_path, run_id="m", make_results=False)
    assert merged.gathering is not None and merged.cells == len(CELLS) + 1
    assert not merged.gathering.ready
    assert assert_snapshot_as_from_the_lines(merged) is not None


def test_a_record_with_a_carriage_return_is_read_from_its_lines(tmp_path: Path) -> None:
    """A line with a carriage return in it (JSON whitespace): the store may read it as two
    lines where the merge reads one, so that shard's snapshot stands for none of its lines."""
    stores = shards_that_ran_everything(tmp_path / "shards")
    line = json.dumps(result(CELLS[4], "s1", Outcome.FAIL, attempt=2).to_dict())
    add_line(stores[1], line.replace(', "', ',\r"', 1).encode() + b"\n")
    snapshot.load(stores[1].run_dir)
    merged = merge_runs(stores, tmp_path, run_id="m", make_results=False)
    assert merged.gathering is not None and not merged.gathering.ready
    assert merged.gathering.read_as[stores[1].run_dir] is None
    assert merged.gathering.read_as[stores[0].run_dir] is not None
    assert assert_snapshot_as_from_the_lines(merged) is not None


@pytest.mark.parametrize("secret", [False, True])
def test_merged_again_under_its_name_the_verdicts_judge_against_the_run_it_replaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        secret: bool) -> None:
    """``--baseline latest`` naming the merge being replaced: the verdicts, like the report,
    judge against that run as it was before (loaded first), never the half-written one
    (every failure new) nor the merge itself; with a secret redacted or not."""
    stores = []
    for n in range(3):
        cells = CELLS[n * 4:(n + 1) * 4]
        store = RunStore.create(tmp_path / "shards", {"planned": cells, "full_plan": CELLS,
                                                      "shard": f"{n + 1}/3"}, run_id=f"s{n}")
        for i, cell in enumerate(cells):
            record(store, result(cell, store.run_id, (Outcome.PASS, Outcome.FAIL)[i % 2]))
        stores.append(store)
    merge = ["--reports", str(tmp_path), "merge", *(str(s.run_dir) for s in stores),
             "--run-id", "m", "--no-report"]
    assert main(merge) == 1  # six failures nobody expected
    if secret:
        monkeypatch.setenv("DEPLOY_TOKEN", "hunter2-secret")
    capfd.readouterr()
    assert main([*merge, "--baseline", "latest", "--fail-on", "new"]) == 0
    out = capfd.readouterr().out
    assert "6 known failures" in out and "new failure" not in out, out

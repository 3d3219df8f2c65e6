"""The merge's log links; an earlier merge of the same name, replaced whole."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from harness.core.errors import StoreError, UsageError
from harness.core.results import Outcome
from harness.records import merge, table
from harness.records.merge import _link, merge_runs
from harness.records.store import RunStore, open_runs
from tests.records.test_merge_verbatim import CELLS, record, result


def shards_that_ran_everything(reports: Path) -> list[RunStore]:
    """Three shards that each ran their cells and ended with their table."""
    stores = []
    for n in range(3):
        cells = CELLS[n * 4:(n + 1) * 4]
        store = RunStore.create(reports, {"planned": cells, "full_plan": CELLS,
                                          "shard": f"{n + 1}/3"}, run_id=f"s{n}")
        for i, cell in enumerate(cells):
            record(store, result(cell, store.run_id, (Outcome.PASS, Outcome.SKIP)[i % 2],
                                 duration=i + 0.25))
        table.read(store.run_dir)
        stores.append(store)
    return stores


def test_a_log_is_linked_into_a_folder_made_for_it_and_one_there_is_kept(
        tmp_path: Path) -> None:
    src = tmp_path / "shard" / "logs" / "a\n.log"  # any name a file may have
    src.parent.mkdir(parents=True)
    src.write_text("log a")
    target = tmp_path / "merged" / "logs" / "nested" / "a\n.log"
    _link(str(src), str(target))
    assert target.read_text() == "log a" and target.stat().st_ino == src.stat().st_ino
    other = tmp_path / "b.log"
    other.write_text("log b")
    _link(str(other), str(target))  # an environment two shards built: the first kept
    assert target.read_text() == "log a"


def test_a_link_that_cannot_be_made_is_raised(tmp_path: Path) -> None:
    src = tmp_path / "a.log"
    src.write_text("a")
    (tmp_path / "merged").write_text("a file where the logs' folder should go")
    with pytest.raises(NotADirectoryError):
        _link(str(src), str(tmp_path / "merged" / "logs" / "a.log"))


def test_logs_are_linked_when_the_merge_returns_and_a_link_that_fails_is_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    merge_runs(sources, out, run_id="m")
    assert all((first / r.log).is_file() for r in RunStore(first).results() if r.log)
    assert not (out / ".replaced").exists()

    def failing(src: str, target: str) -> None:
        raise PermissionError(f"{target}: read-only")

    monkeypatch.setattr(merge, "_link", failing)
    with pytest.raises(PermissionError, match="read-only"):
        merge_runs(sources, out, run_id="m")


def test_merging_again_under_a_name_replaces_the_earlier_merge_whole(tmp_path: Path) -> None:
    """The earlier merge leaves ``runs/`` at once (renamed) and nothing of it is left when
    the merge returns, nor of one a killed merge set aside; ``.replaced/`` is gone too."""
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    (first / "stray.txt").write_text("of the earlier merge")
    left = out / ".replaced" / "1-2"  # what a merge killed after setting one aside leaves
    (left / "logs").mkdir(parents=True)
    (left / "logs" / "a.log").write_text("x")
    again = merge_runs(sources, out, run_id="m").store
    assert again.run_dir == first and not (first / "stray.txt").exists()
    assert [r.cell_id for r in again.results()] == [c["cell_id"] for c in CELLS]
    assert not (out / ".replaced").exists()
    assert [p.name for p in (out / "runs").iterdir()] == ["m"]


def test_where_it_cannot_be_set_aside_the_earlier_merge_is_removed_in_place(
        tmp_path: Path) -> None:
    """No ``.replaced/`` to be had (a file of that name; likewise a rename across file
    systems): the earlier merge is removed where it is, and the file left alone."""
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    (first / "stray.txt").write_text("of the earlier merge")
    (out / ".replaced").write_text("not ours")
    again = merge_runs(sources, out, run_id="m").store
    assert again.run_dir == first and not (first / "stray.txt").exists()
    assert (out / ".replaced").read_text() == "not ours"


def test_a_shard_that_cannot_be_read_puts_the_earlier_merge_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shards are read before the earlier merge is touched: the reading fails, it stays
    as it was."""
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    (first / "stray.txt").write_text("of the earlier merge")
    before = (first / "results.jsonl").read_bytes()

    def unreadable(self: RunStore) -> list[object]:
        raise StoreError(f"{self.run_dir}: unreadable")

    monkeypatch.setattr(RunStore, "results", unreadable)
    with pytest.raises(StoreError, match="unreadable"):
        merge_runs(sources, out, run_id="m")
    assert (first / "stray.txt").read_text() == "of the earlier merge"
    assert (first / "results.jsonl").read_bytes() == before
    assert not (out / ".replaced").exists()


def test_a_folder_that_cannot_be_made_puts_the_earlier_merge_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Set aside, then the new folder fails half made: the earlier merge is back in its
    place, nothing of the new one left, nothing under ``.replaced/``."""
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    (first / "stray.txt").write_text("of the earlier merge")

    def half_made(reports: Path, *args: object, run_id: str, **kwargs: object) -> RunStore:
        (reports / "runs" / run_id).mkdir(parents=True)
        (reports / "runs" / run_id / "run.json").write_text("{")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RunStore, "create", half_made)
    with pytest.raises(OSError, match="No space"):
        merge_runs(sources, out, run_id="m")
    assert (first / "stray.txt").read_text() == "of the earlier merge"
    assert len(RunStore(first).results()) == len(CELLS)
    assert not (out / ".replaced").exists()


def test_the_lines_a_merge_passes_through_are_not_walked_by_the_cycle_collector(
        tmp_path: Path) -> None:
    """Results are never in a cycle: untracked, so a 100,000-cell merge with the collector
    on does not walk them at every collection."""
    merged = merge_runs(shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out",
                        run_id="m")
    rows = merged.written
    assert len(rows) == len(CELLS)
    assert not any(gc.is_tracked(r) for r in rows)


def test_a_merge_returns_with_its_table_written(tmp_path: Path) -> None:
    """The merged run's table is current when ``merge_runs`` returns (written beside the
    links, not after them by the caller)."""
    merged = merge_runs(shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out",
                        run_id="m")
    found = table.current(merged.store.run_dir, ("cell_id",))
    assert found is not None and found.column("cell_id") == [r.cell_id for r in merged.written]


def test_a_run_named_twice_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """It merged the run with itself without a word: every cell a conflict with itself."""
    shard = shards_that_ran_everything(tmp_path)[0]
    with pytest.raises(UsageError, match="merge: a run is named twice"):  # by id, then folder
        merge_runs(open_runs(tmp_path, [shard.run_id, str(shard.run_dir)], "merge"), tmp_path,
                   run_id="m")
    assert not (tmp_path / "runs" / "m").exists()


def test_runs_of_different_matrices_that_ran_a_cell_as_two_are_refused(tmp_path: Path) -> None:
    """Its environment edited between two nights, a cell has a new id: merged (or reported
    together), it was counted twice and its verdict said it works and fails on one version."""
    stores = []
    for n, outcome in enumerate((Outcome.PASS, Outcome.FAIL)):
        cell = {**CELLS[0], "cell_id": f"edited{n}"}
        store = RunStore.create(tmp_path, {"planned": [cell], "matrix_sha256": f"m{n}"},
                                run_id=f"night{n}")
        record(store, result(cell, store.run_id, outcome))
        stores.append(store)
    with pytest.raises(UsageError, match=r"^night0 and night1 ran env-0 case::v0 @cpu as two "):
        merge_runs(stores, tmp_path, run_id="m")
    assert not (tmp_path / "runs" / "m").exists()


def test_a_run_that_is_not_a_merge_is_not_replaced_by_one(tmp_path: Path) -> None:
    """``merge --run-id`` naming a run of ``harness run`` removed its record without a word."""
    sources = shards_that_ran_everything(tmp_path / "shards")
    mine = RunStore.create(tmp_path / "out", {"planned": CELLS[:1]}, run_id="tuesday")
    record(mine, result(CELLS[0], "tuesday", Outcome.PASS))
    before = (mine.run_dir / "results.jsonl").read_bytes()
    with pytest.raises(UsageError, match=r"^merge: run tuesday exists and is not a merge; "):
        merge_runs(sources, tmp_path / "out", run_id="tuesday")
    assert (mine.run_dir / "results.jsonl").read_bytes() == before


def test_a_cell_its_shard_reported_without_is_not_said_to_be_of_a_shard_that_never_reported(
        tmp_path: Path) -> None:
    """A shard killed before its last cell (a job's timeout) uploads what it has: its missing
    cell said "shard 1/3 never reported (its artifact is missing)", beside the shard's own."""
    ran, others = tmp_path / "ran", shards_that_ran_everything(tmp_path / "shards")[1:]
    cut = RunStore.create(ran, {"planned": CELLS[:4], "full_plan": CELLS, "shard": "1/3"},
                          run_id="s0")
    for cell in CELLS[:3]:
        record(cut, result(cell, "s0", Outcome.PASS))
    merged = merge_runs([cut, *others], tmp_path / "out", run_id="m")
    (gap,) = [r for r in merged.written if r.outcome is Outcome.MISSING]
    assert gap.cell_id == CELLS[3]["cell_id"]
    assert gap.reason == "no result: shard 1/3 reported without it"


def test_the_cells_of_the_one_shard_that_never_reported_name_it(tmp_path: Path) -> None:
    """They said "the shard that should have run it never reported": shards 1 to 3 of 3 hold
    cells (as many as the plan's environments), so the one not here is 2/3."""
    s0, _, s2 = shards_that_ran_everything(tmp_path / "shards")
    merged = merge_runs([s0, s2], tmp_path / "out", run_id="m")
    assert {r.reason for r in merged.written if r.outcome is Outcome.MISSING} == {
        "no result: shard 2/3 never reported (its artifact is missing)"}
    merged = merge_runs([s0], tmp_path / "out", run_id="m")  # two gone: which one, unknown
    assert {r.reason for r in merged.written if r.outcome is Outcome.MISSING} == {
        "no result: the shard that should have run it never reported (its artifact is missing)"}


def test_shards_of_two_plans_merged_together_are_said(tmp_path: Path) -> None:
    """Shard 1/3 of one -k and shards of another merged without a word: a record of neither
    plan, the other plan's cells beside it and none of its gaps MISSING."""
    sources = shards_that_ran_everything(tmp_path / "shards")
    other = tmp_path / "shards" / "runs" / "s1" / "run.json"
    meta = json.loads(other.read_text())
    other.write_text(json.dumps({**meta, "filters": {"keyword": "test_o*"}}))
    said: list[str] = []
    merge_runs([RunStore(s.run_dir) for s in sources], tmp_path / "out", run_id="m",
               warn=said.append)
    assert said == [f"{sources[1].run_dir}: a shard of another plan than {sources[0].run_dir} "
                    "(the matrix, filters or --set differ); the merged plan is the latter's"]


def test_the_plan_is_taken_from_a_shard_that_has_it(tmp_path: Path) -> None:
    """The first shard's full_plan.json lost (a partial artifact): the merge planned nothing,
    and the cells of a shard that never reported were neither MISSING nor counted."""
    s0, s1, _ = shards_that_ran_everything(tmp_path / "shards")
    (s0.run_dir / "full_plan.json").unlink()
    merged = merge_runs([s0, s1], tmp_path / "out", run_id="m")
    assert (merged.cells, merged.missing) == (len(CELLS), 4)


def test_a_suite_session_that_came_back_as_its_tests_is_counted_as_them(tmp_path: Path) -> None:
    """"merged 1 runs: 8 cells" of a run whose report said 6 (its tests) and whose plan 2 (the
    sessions): the sessions' own lines were counted too."""
    session = CELLS[0]
    store = RunStore.create(tmp_path, {"planned": [session]}, run_id="suite")
    record(store, result(session, "suite", Outcome.FAIL))
    for n, outcome in enumerate((Outcome.PASS, Outcome.FAIL)):
        test = {**session, "cell_id": f"test{n}", "variant": f"t.py::test_{n}"}
        record(store, result(test, "suite", outcome, parent=session["cell_id"]))
    merged = merge_runs([store], tmp_path, run_id="m")
    assert (merged.cells, merged.missing) == (2, 0)

"""The merge's log links, made in a process of their own (or on a thread, where there is no
fork): all there on close, or an error. An earlier merge of the same name, replaced."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.core.errors import StoreError
from harness.core.results import Outcome
from harness.records import table
from harness.records.merge import _Linker, _Read, _SetAside, merge_runs
from harness.records.store import RunStore
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


@pytest.fixture(params=["process", "thread"])
def linker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> _Linker:
    if request.param == "thread":
        monkeypatch.delattr(os, "fork")
    made = _Linker()
    assert (made.thread is None) == (request.param == "process")
    return made


def test_every_link_is_in_place_when_close_returns(tmp_path: Path, linker: _Linker) -> None:
    (tmp_path / "shard" / "logs").mkdir(parents=True)
    for i in range(5000):  # more than a pipe holds at once
        src = tmp_path / "shard" / "logs" / f"{i}\n.log"  # any name a file may have
        src.write_text(f"log {i}")
        linker.link(str(src), str(tmp_path / "merged" / "logs" / f"{i}\n.log"))  # folder made
    linker.link(str(src), str(tmp_path / "merged" / "logs" / f"{i}\n.log"))  # there: kept
    linker.close()
    assert sorted(p.read_text() for p in (tmp_path / "merged" / "logs").iterdir()) == sorted(
        f"log {i}" for i in range(5000))
    if linker.thread is not None:
        assert not linker.thread.is_alive()
    else:
        with pytest.raises(ChildProcessError):  # reaped
            os.waitpid(linker.pid, 0)


def test_a_link_that_cannot_be_made_is_raised_by_close(tmp_path: Path, linker: _Linker
                                                       ) -> None:
    src = tmp_path / "a.log"
    src.write_text("a")
    (tmp_path / "merged").write_text("a file where the logs' folder should go")
    linker.link(str(src), str(tmp_path / "merged" / "logs" / "a.log"))
    linker.link(str(src), str(tmp_path / "b.log"))  # after the error: not made
    with pytest.raises(NotADirectoryError):
        linker.close()
    assert not (tmp_path / "b.log").exists()


def test_a_linker_closed_without_links_ends(linker: _Linker) -> None:
    linker.close()


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
    """The earlier merge is set aside while the shards are read; the reading fails: it is
    put back as it was, nothing of the new one left."""
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    (first / "stray.txt").write_text("of the earlier merge")
    before = (first / "results.jsonl").read_bytes()

    def unreadable(self: _Read) -> list[object]:
        raise StoreError(f"{self.run_dir}: unreadable")

    monkeypatch.setattr(_Read, "last_attempts", unreadable)
    with pytest.raises(StoreError, match="unreadable"):
        merge_runs(sources, out, run_id="m")
    assert (first / "stray.txt").read_text() == "of the earlier merge"
    assert (first / "results.jsonl").read_bytes() == before
    assert not (out / ".replaced").exists()


def test_no_process_to_remove_it_removes_it_here(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``rm`` cannot be started (no process to be had): the earlier merge is removed in the
    merge's own process, and the merge ends as it would."""
    sources, out = shards_that_ran_everything(tmp_path / "shards"), tmp_path / "out"
    first = merge_runs(sources, out, run_id="m").store.run_dir
    (first / "stray.txt").write_text("of the earlier merge")

    def no_process(*args: object, **kwargs: object) -> None:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    again = merge_runs(sources, out, run_id="m").store
    assert not (first / "stray.txt").exists() and len(again.results()) == len(CELLS)
    assert not (out / ".replaced").exists()


def test_an_empty_set_aside_folder_spawns_nothing_and_goes(tmp_path: Path) -> None:
    aside = _SetAside(tmp_path)
    aside.remove()  # no .replaced/ at all
    assert aside.process is None
    (tmp_path / ".replaced").mkdir()
    aside.remove()
    assert aside.process is None
    aside.wait()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("secret", [False, True])
def test_beside_sees_the_cells_chosen_while_the_logs_are_still_linked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: bool) -> None:
    """``beside`` (the merge command's verdicts) gets the cells as they are written, before
    the merge waits for its log links; not where a secret is redacted (the cells written
    are then read back from the record)."""
    stores = shards_that_ran_everything(tmp_path / "shards")
    if secret:
        monkeypatch.setenv("DEPLOY_TOKEN", "hunter2-secret")
    events: list[object] = []
    close = _Linker.close

    def closing(self: _Linker) -> None:
        events.append("links waited for")
        close(self)

    monkeypatch.setattr(_Linker, "close", closing)
    report = merge_runs(stores, tmp_path, run_id="m", make_results=False,
                        beside=lambda chosen: events.append([r.cell_id for r in chosen.judged]))
    ids = [r.cell_id for r in report.written]
    assert len(ids) == 12
    assert events == (["links waited for"] if secret else [ids, "links waited for"])

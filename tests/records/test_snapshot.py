from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import jsonio
from harness.core.errors import HarnessError
from harness.core.results import CellResult, Outcome
from harness.records import codec, snapshot
from harness.records.snapshot import LETTER_FIELDS as LETTERS
from harness.records.snapshot import SNAPSHOT, load, read, rows_of, write
from harness.records.store import RunStore
from harness.report.build import write_report
from harness.report.writers import WRITERS
from tests.conftest import examples

TEXT = st.text(alphabet=st.sampled_from("ab:=<\t\n é::"), max_size=6)


@st.composite
def results(draw: st.DrawFn) -> list[CellResult]:
    fingerprints = draw(st.lists(st.one_of(st.just({}), st.fixed_dictionaries(
        {"key": st.dictionaries(TEXT, TEXT, max_size=3)},
        optional={"freeze_sha256": TEXT})), min_size=1, max_size=3))
    out = []
    for i in range(draw(st.integers(0, 12))):
        out.append(CellResult(
            run_id="r", cell_id=f"c{i}", environment=draw(TEXT),
            values=draw(st.dictionaries(TEXT, TEXT, max_size=2)), env_key="k", backend="uv",
            case_id=draw(TEXT), variant=draw(TEXT), nodeid="n", hardware_target=draw(TEXT),
            outcome=draw(st.sampled_from(Outcome)), signature=draw(st.none() | TEXT),
            duration=draw(st.floats(0, 1e6, allow_nan=False)),
            fingerprint=draw(st.sampled_from(fingerprints))))
    return out


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results())
def test_a_snapshot_reads_back_the_rows_it_was_made_of(tmp_path: Path,
                                                        cells: list[CellResult]) -> None:
    (tmp_path / "results.jsonl").write_bytes(b"x" * len(cells))  # the size is what is checked
    write(tmp_path, cells)
    found = read(tmp_path)
    assert found is not None
    assert found.rows() == rows_of(cells)
    assert found.logical_keys() == [r.logical_key for r in cells]
    assert found.cell_ids == [r.cell_id for r in cells]
    assert found.outcomes() == {r.logical_key: r.outcome for r in cells}
    assert found.durations_by_cell() == {r.cell_id: r.duration for r in cells if r.duration}


def cell(cell_id: str, torch: str, outcome: Outcome, variant: str = "repro") -> CellResult:
    return CellResult(run_id="r", cell_id=cell_id, environment=f"cpu:torch={torch}",
                      values={"torch": torch}, env_key=torch, backend="uv", case_id="probes",
                      variant=variant, nodeid="t.py::x", hardware_target="cpu",
                      outcome=outcome, duration=1.5,
                      fingerprint={"key": {"torch": torch}, "freeze_sha256": torch})


def test_a_stale_or_damaged_snapshot_is_made_again_from_the_record(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(cell("a", "2.0.1", Outcome.PASS))
    assert [r.outcome for r in load(store.run_dir).rows()] == [Outcome.PASS]
    assert snapshot.is_current(store.run_dir)
    store.append(cell("a", "2.0.1", Outcome.FAIL))  # the run went on: a second attempt
    assert not snapshot.is_current(store.run_dir) and read(store.run_dir) is None
    assert [r.outcome for r in load(store.run_dir).rows()] == [Outcome.FAIL]
    path = store.run_dir / SNAPSHOT
    head, first, rest = path.read_bytes().split(b"\n", 2)
    data = {**json.loads(first), **json.loads(rest)}
    assert set(json.loads(first)) == set(LETTERS)  # the letters line holds these alone

    def put(value: object) -> None:  # the letters line and the rest, as write() splits them
        lines = ([{k: v for k, v in value.items() if k in LETTERS},
                  {k: v for k, v in value.items() if k not in LETTERS}]
                 if isinstance(value, dict) else [value, value])
        path.write_bytes(head + b"".join(b"\n" + json.dumps(v).encode() for v in lines))

    put(data)
    assert snapshot.letters(store.run_dir) == ("F", data["keys_digest"])
    for damage in ({**data, "codes": {**data["codes"], "environment": [7]}},  # out of range
                   {**data, "codes": {**data["codes"], "environment": [-1]}},
                   {**data, "codes": {**data["codes"], "environment": [0.0]}},
                   {**data, "tables": {**data["tables"], "environment": "a"}},
                   {**data, "tables": {**data["tables"], "values": ["x"]}},
                   {**data, "outcome": ["F"]}, {**data, "duration": ["1"]},
                   {**data, "cell_id": {"a": 1}}, [data],
                   {**data, "outcome": "Z"}, {**data, "cell_id": []},
                   {**data, "format": 1}, {**data, "cells": 2}):
        put(damage)
        assert read(store.run_dir) is None
        assert [r.outcome for r in load(store.run_dir).rows()] == [Outcome.FAIL]
    for text in (b"\n{not json", b"\n" + first + b"\n{not json", b""):
        path.write_bytes(head + text)
        assert read(store.run_dir) is None
        assert load(store.run_dir).cell_ids == ["a"]
        path.write_bytes(head + text)
        assert snapshot.letters(store.run_dir).letters == "F"  # made again where damaged
    # The same size, rewritten (a hand edit): its modification time makes the snapshot stale.
    record = store.run_dir / "results.jsonl"
    text = record.read_text()
    record.write_text(text.replace('"FAIL"', '"PASS"'))
    os.utime(record, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert [r.outcome for r in load(store.run_dir).rows()] == [Outcome.PASS]


def test_a_record_the_store_reads_never_breaks_its_snapshot(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    odd = cell("a", "2.0.1", Outcome.PASS).to_dict()
    with open(store.run_dir / "results.jsonl", "a") as fh:  # written by hand, not by the store
        fh.write(json.dumps({**odd, "values": None}) + "\n")
        fh.write(json.dumps({**odd, "environment": ["a", "list"]}) + "\n")  # damaged
    rows = load(store.run_dir).rows()
    assert [(r.environment, r.values) for r in rows] == [("cpu:torch=2.0.1", None)]
    assert not snapshot.is_current(store.run_dir)  # a damaged record keeps none


def test_a_reports_snapshot_is_the_one_a_reader_makes_from_the_record(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": [{"cell_id": "z"}, {"cell_id": "a"}]})
    # Two cells of one logical key (a pin changed on a resume), the plan in another order.
    store.extend([cell("a", "2.0.1", Outcome.PASS), cell("z", "2.0.1", Outcome.FAIL),
                  cell("a", "2.0.1", Outcome.PASS)])
    write_report(store, tmp_path / "report")
    written = (store.run_dir / SNAPSHOT).read_bytes()
    (store.run_dir / SNAPSHOT).unlink()
    load(store.run_dir)
    assert (store.run_dir / SNAPSHOT).read_bytes() == written


def test_a_read_only_run_is_read_from_its_record(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(cell("a", "2.0.1", Outcome.REPRODUCED))

    def refuse(path: Path, data: bytes) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(snapshot.atomic, "write_bytes", refuse)
    found = load(store.run_dir)
    assert not (store.run_dir / SNAPSHOT).exists()
    assert found.rows() == rows_of(store.results()) and found.keys_digest


def test_what_changed_reads_the_run_before_from_its_snapshot_not_its_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = RunStore.create(tmp_path, {"planned": []}, run_id="night-1")
    before.extend([cell("a", "2.0.1", Outcome.PASS), cell("b", "2.0.1", Outcome.PASS, "other")])
    write_report(before, tmp_path / "r1")
    assert snapshot.is_current(before.run_dir)  # the report left it for the next night
    after = RunStore.create(tmp_path, {"planned": []}, run_id="night-2")
    after.extend([cell("a2", "2.0.1", Outcome.CRASH), cell("b", "2.0.1", Outcome.PASS, "other")])
    reading = RunStore.attempts

    def attempts(store: RunStore) -> list[CellResult]:
        assert store.run_dir != before.run_dir, "the run before's record was read"
        return reading(store)

    monkeypatch.setattr(RunStore, "attempts", attempts)
    monkeypatch.delitem(WRITERS, "check")  # the suite's check reads both records, on purpose
    summary = write_report(after, tmp_path / "r2", previous=before)["summary"].read_text()
    assert "## Changes since night-1" in summary
    assert "new failure" in summary and "PASS -> CRASH" in summary.replace("→", "->")


@pytest.mark.parametrize("no_report", [True, False])
def test_a_merge_leaves_the_merged_runs_snapshot(tmp_path: Path, no_report: bool) -> None:
    from harness.cli import main

    shards = []
    for name, cells in (("s1", [cell("a", "2.0.1", Outcome.PASS)]),
                        ("s2", [cell("b", "2.1.2", Outcome.REPRODUCED)])):
        store = RunStore.create(tmp_path, {"planned": []}, run_id=name)
        store.extend(cells)
        shards.append(str(store.run_dir))
    args = ["--reports", str(tmp_path), "merge", *shards, "--run-id", "m"]
    assert main(args + (["--no-report"] if no_report else [])) == 0
    merged = tmp_path / "runs" / "m"
    assert snapshot.is_current(merged)
    assert {(r.cell_id, r.outcome) for r in load(merged).rows()} == {
        ("a", Outcome.PASS), ("b", Outcome.REPRODUCED)}


def test_runs_without_snapshots_get_their_keys_made_on_two_cores(tmp_path: Path) -> None:
    runs = []
    for i in range(5):
        store = RunStore.create(tmp_path, {"planned": []}, run_id=f"night-{i}")
        store.extend([cell(f"c{j}", f"2.{i}.{j}", Outcome.PASS if (i + j) % 3 else Outcome.FAIL)
                      for j in range(4)])
        runs.append(store.run_dir)
    (runs[1] / "results.jsonl").unlink()  # nothing to make it from: left alone
    (runs[2] / "results.jsonl").write_text('{"not": "a result"}\n{torn')  # an empty one
    write(runs[3], RunStore(runs[3]).results())  # current already: kept as it is
    kept = (runs[3] / SNAPSHOT).stat().st_mtime_ns
    broken = RunStore.create(tmp_path, {"planned": []}, run_id="broken").run_dir
    (broken / "results.jsonl").mkdir()  # unreadable: its reader says why, not this
    snapshot.make_missing([*runs, broken])
    # (runs[2] is damaged: it keeps no snapshot, each reader names its lines)
    assert [snapshot.is_current(r, keys=True) for r in runs] == [True, False, False, True, True]
    assert not snapshot.is_current(broken, keys=True)
    assert (runs[3] / SNAPSHOT).stat().st_mtime_ns == kept
    with pytest.raises(IsADirectoryError):
        load(broken)
    # runs[2]'s record holds damaged lines: no snapshot kept (each reader names them).
    assert [snapshot.is_current(r) for r in runs] == [False, False, False, True, False]
    for run in (runs[0], runs[4]):
        made = (run / SNAPSHOT).read_bytes()
        (run / SNAPSHOT).unlink()
        snapshot.keys(run)  # as this process makes it
        assert (run / SNAPSHOT).read_bytes() == made


def test_a_whole_snapshot_made_meanwhile_is_kept(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's end or its report writing the whole snapshot between history's listing of the
    runs to make and its making them: the whole one stays, not made a snapshot of keys."""
    runs = []
    for i in range(2):
        store = RunStore.create(tmp_path, {"planned": []}, run_id=f"night-{i}")
        store.append(cell("a", f"2.{i}.0", Outcome.PASS))
        runs.append(store.run_dir)

    def meanwhile(there: object, here: object, what: str) -> None:
        for run in runs:
            write(run, RunStore(run).results())
        there()  # type: ignore[operator]
        here()  # type: ignore[operator]

    monkeypatch.setattr(snapshot, "side_by_side", meanwhile)
    snapshot.make_missing(runs)
    assert all(snapshot.is_current(r) for r in runs)


def test_a_second_process_that_fails_leaves_the_snapshots_to_their_readers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = []
    for i in range(3):
        store = RunStore.create(tmp_path, {"planned": []}, run_id=f"night-{i}")
        store.append(cell("a", f"2.{i}.0", Outcome.PASS))
        runs.append(store.run_dir)

    def killed(*_: object) -> None:
        raise HarnessError("making run snapshots: its process ended abnormally (killed by "
                           "signal 9)")

    monkeypatch.setattr(snapshot, "side_by_side", killed)
    snapshot.make_missing(runs)  # no error: history goes on
    assert not any(snapshot.is_current(r, keys=True) for r in runs)
    assert [load(r).cell_ids for r in runs] == [["a"]] * 3  # each made by its reader


def _by_store(run_dir: Path) -> bytes:
    """The document as it was always made: the record read by ``RunStore``."""
    return jsonio.dumps(_by_store_document(run_dir))


def _by_store_document(run_dir: Path) -> dict[str, object]:
    return snapshot._document(RunStore(run_dir).results())


def _retried(tmp_path_factory: pytest.TempPathFactory, cells: list[CellResult],
             retried: list[int], outcome: Outcome) -> RunStore:
    """A record of ``cells``, the ``retried`` ones again later, their second attempt ending
    with ``outcome`` (the cell's last attempt: what a snapshot keeps)."""
    store = RunStore.create(tmp_path_factory.mktemp("runs"), {"planned": []})
    store.extend(cells + [replace(cells[i], attempt=2, outcome=outcome, duration=3)
                          for i in retried if i < len(cells)])
    return store


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results(), retried=st.lists(st.integers(0, 11), max_size=4))
def test_a_record_the_harness_wrote_is_read_in_one_pass_into_the_same_document(
        tmp_path_factory: pytest.TempPathFactory, cells: list[CellResult],
        retried: list[int]) -> None:
    """Lines as the store writes them (fingerprints named in shared.jsonl, retries later in
    the record): read by msgspec into only what the snapshot keeps, the same document,
    byte for byte, as the store's reading gives."""
    store = _retried(tmp_path_factory, cells, retried, Outcome.PASS)
    fast = snapshot._from_record(store.run_dir)
    assert fast is not None and jsonio.dumps(fast) == _by_store(store.run_dir)


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results(), retried=st.lists(st.integers(0, 11), max_size=4))
def test_a_snapshot_of_the_keys_says_what_the_whole_one_does(
        tmp_path_factory: pytest.TempPathFactory, cells: list[CellResult],
        retried: list[int]) -> None:
    """What history's first reading keeps of a run (``make_missing``): the letters, the keys'
    digest and each cell's logical key the whole snapshot has; only readers of those take
    it, and ``load`` makes the whole snapshot over it."""
    store = _retried(tmp_path_factory, cells, retried, Outcome.FAIL)
    run, path = store.run_dir, store.run_dir / SNAPSHOT
    whole = snapshot.Snapshot(_by_store_document(run))
    found = snapshot.keys(run)  # none there: made from the record, a snapshot of the keys
    assert path.read_bytes().split(b"\n", 1)[0].endswith(b" keys 2")
    assert found == (whole.letters, whole.keys_digest, whole.logical_keys())
    assert snapshot.letters(run) == (whole.letters, whole.keys_digest)
    assert snapshot.keys(run) == found  # read back
    assert snapshot.is_current(run, keys=True) and not snapshot.is_current(run)
    assert read(run) is None  # never taken for the whole
    assert jsonio.dumps(load(run)._data) == jsonio.dumps(whole._data)  # made over it
    assert snapshot.is_current(run) and snapshot.keys(run) == found


def test_a_damaged_snapshot_of_the_keys_is_made_again(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("a", "2.0.1", Outcome.PASS), cell("b", "2.1.0", Outcome.FAIL)])
    run, path = store.run_dir, store.run_dir / SNAPSHOT
    made = snapshot.keys(run)
    head, first, rest = path.read_bytes().split(b"\n", 2)
    data = json.loads(rest)
    for damage in ({**data, "codes": {**data["codes"], "variant": [0, 5]}},
                   {**data, "tables": {**data["tables"], "hardware_target": [3]}},
                   {"tables": data["tables"]}, [data]):
        path.write_bytes(head + b"\n" + first + b"\n" + json.dumps(damage).encode())
        assert snapshot.keys(run) == made
        assert path.read_bytes() == head + b"\n" + first + b"\n" + rest  # made again
    store.append(cell("a", "2.0.1", Outcome.CRASH))  # the run went on: stale, as the whole
    assert not snapshot.is_current(run, keys=True)
    assert snapshot.letters(run).letters == "CF"


def _line(**changes: object) -> bytes:
    row = cell("c9", "2.1.2", Outcome.FAIL).to_dict()
    row.update(changes)
    return json.dumps(row).encode()


@pytest.mark.parametrize(("what", "text"), [
    ("a torn last line", b'{"run_id": "r", "cell_id": "c'),
    ("a blank line", b"\n"),
    ("two values on a line", _line() + b" " + _line(cell_id="c8")),
    ("a value over two lines", _line().replace(b', "environment"', b',\n"environment"')),
    ("NaN", _line(duration=float("nan"))),
    ("a lone surrogate", _line(reason="\ud800")),
    ("an unknown outcome", _line(outcome="GREAT")),
    ("a required field missing", json.dumps({"cell_id": "c7", "outcome": "PASS"}).encode()),
    ("a number where text goes", _line(environment=7)),
    ("not an object", b"[1, 2]"),
    ("an infinity as json writes it", _line(duration=float("inf"))),
    ("bytes that are not UTF-8 in a field the snapshot skips",
     _line()[:-1] + b', "reason": "caf\xe9"}'),
    ("a carriage return between fields", _line().replace(b', "variant"', b',\r"variant"')),
    ("a CRLF line", _line(cell_id="c5") + b"\r"),
])
def test_a_line_the_harness_would_not_write_sends_the_record_to_the_store(
        tmp_path: Path, what: str, text: bytes) -> None:
    """Any line that is not one result as the harness writes it: the one-pass reading gives
    up (None), and the snapshot is made from the store's reading, as before."""
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED), cell("c2", "2.1.2", Outcome.PASS)])
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(text + b"\n" + _line(cell_id="c3") + b"\n")
    assert snapshot._from_record(store.run_dir) is None, what
    assert snapshot._from_record(store.run_dir, keys_only=True) is None, what
    assert snapshot.letters(store.run_dir).letters == load(store.run_dir).letters
    assert jsonio.dumps(load(store.run_dir)._data) == _by_store(store.run_dir)


@pytest.mark.parametrize(("what", "text"), [
    ("fields it does not know, a value inline", _line(note="by hand", fingerprint={"key": {}})),
    ("optional fields missing", json.dumps({k: v for k, v in json.loads(_line()).items()
                                            if k not in ("signature", "duration", "log",
                                                         "fingerprint")}).encode()),
    ("a null fingerprint, a name shared.jsonl lacks", _line(fingerprint=None)
     + b"\n" + _line(cell_id="c4", fingerprint="feedfacefeedface")),
    ("a whole-number duration, a key twice", _line(duration=3)[:-1] + b', "variant": "w"}'),
    ("the same cell again", _line(cell_id="c1", outcome="PASS", attempt=2)),
    ("numbers in values and a fingerprint, an integer past 64 bits",
     _line(cell_id="c6", values={"torch": "2.1.2", "n": 3, "big": 2**70},
           fingerprint={"key": {"torch": 2.5}, "freeze_sha256": 7}, duration=2**70)),
    ("fingerprints that are no mapping, or hold none where one goes (by hand)",
     b"\n".join(_line(cell_id=f"c{7 + i}", fingerprint=fp) for i, fp in enumerate(
         (5, [1], {"key": [1], "torch": "x"}, {"key": "torch"})))),
])
def test_lines_a_result_may_hold_are_read_in_one_pass_as_the_store_reads_them(
        tmp_path: Path, what: str, text: bytes) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED), cell("c2", "2.1.2", Outcome.PASS)])
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(text + b"\n")
    fast = snapshot._from_record(store.run_dir)
    assert fast is not None, what
    assert jsonio.dumps(fast) == _by_store(store.run_dir), what


def test_the_last_line_without_its_newline_is_read_in_one_pass(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED)])
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(_line(cell_id="c2"))  # whole, its newline not written yet
    fast = snapshot._from_record(store.run_dir)
    assert fast is not None and fast["cell_id"] == ["c1", "c2"]
    assert jsonio.dumps(fast) == _by_store(store.run_dir)


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results(), chunk=st.integers(1, 700))
def test_lines_cut_across_blocks_read_as_whole_lines(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        cells: list[CellResult], chunk: int) -> None:
    """Blocks of any size (a fleet's are a MiB): a line cut between two is read whole."""
    store = RunStore.create(tmp_path_factory.mktemp("runs"), {"planned": []})
    store.extend(cells)
    monkeypatch.setattr(codec, "CHUNK", chunk)
    fast = snapshot._from_record(store.run_dir)
    assert fast is not None and jsonio.dumps(fast) == _by_store(store.run_dir)


MAPPINGS = st.sampled_from([{"torch": "2.1"}, {"torch": "2.1", "numpy": "<2"},
                            {"numpy": "<2", "torch": "2.1"}, {"torch": 1}, {"torch": True},
                            {}, None, {"torch": "2.2"}, [1], [True], [1.0]])


@settings(max_examples=examples(300), deadline=None)
@given(cells=st.lists(st.tuples(st.integers(0, 3), MAPPINGS, st.booleans()), max_size=12))
def test_mappings_told_apart_by_group_as_cell_by_cell(
        cells: list[tuple[int, object, bool]]) -> None:
    """``_encode_by`` (each environment's cells compared with its first) gives the table and
    codes that telling each cell's mapping apart gives: equal mappings in another order, 1
    and True, a null, lists ([1] == [True], yet written apart), a group whose cells differ.
    A value drawn as a copy or as the same object alike."""
    values = [v.copy() if copy and isinstance(v, dict | list) else v for _, v, copy in cells]
    groups = [g for g, _, _ in cells]
    by_group: list[object] = []
    by_cell: list[object] = []
    assert snapshot._encode_by(values, by_group, groups) == snapshot._encode(
        values, by_cell, snapshot._items)
    assert by_group == by_cell
    assert list(map(id, by_group)) == list(map(id, by_cell))  # the same first objects


@settings(max_examples=examples(300), deadline=None)
@given(entries=st.lists(MAPPINGS | st.none() | TEXT | st.just([1]) | st.just(1) | st.just(True),
                        min_size=1, max_size=8),
       picks=st.lists(st.integers(0, 7), max_size=12), mappings=st.booleans())
def test_entries_reached_by_code_are_told_apart_as_the_cells_values(
        entries: list[object], picks: list[int], mappings: bool) -> None:
    """``_recoded`` (each entry a code reaches, told apart once) gives the table and codes that
    ``_encode`` gives of the values those codes stand for, cell by cell: text, None, 1 and
    True, lists where text belongs (told apart as JSON), mappings in two orders."""
    codes = [p % len(entries) for p in picks]
    key = snapshot._items if mappings else None
    table: list[object] = []
    expected = snapshot._encode([entries[c] for c in codes], table, key)
    found_table, found = snapshot._recoded(codes, entries, key)
    assert found == expected
    assert found_table == table and list(map(type, found_table)) == list(map(type, table))

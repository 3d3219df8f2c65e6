"""A record as ``RunStore.results`` reads it (msgspec against the schema, JSON where it refuses
a line) is, value for value and type for type, what json and ``adopt`` make of it line by
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import astuple, replace

from harness.core import jsonio
from harness.core.results import LINE, CellResult, Outcome, adopt
from harness.records.store import BY_REFERENCE, RunStore, read_shared
from tests.conftest import examples
from tests.records.test_table import results


def cell(cell_id: str, torch: str, outcome: Outcome, variant: str = "repro") -> CellResult:
    return CellResult(run_id="r", cell_id=cell_id, environment=f"cpu:torch={torch}",
                      values={"torch": torch}, env_key=torch, backend="uv", case_id="probes",
                      variant=variant, nodeid="t.py::x", hardware_target="cpu",
                      outcome=outcome, duration=1.5,
                      fingerprint={"key": {"torch": torch}, "freeze_sha256": torch})


def _line(**changes: object) -> bytes:
    row = cell("c9", "2.1.2", Outcome.FAIL).to_dict()
    row.update(changes)
    return json.dumps(row).encode()


def text(rows: list[CellResult]) -> bytes:
    """Rows as JSON text, types told apart (1 and 1.0, True and 1: equal in Python)."""
    return jsonio.dumps([[repr(value) for value in astuple(row)] for row in rows])


def by_json(store: RunStore) -> bytes:
    """The record read line by line by json and ``adopt`` (a line neither takes left out),
    its shared values in place, each cell once: its last attempt at its first place."""
    shared = dict(read_shared(store.run_dir))
    found: dict[str, CellResult] = {}
    data = (store.run_dir / "results.jsonl").read_bytes()[:store.upto]
    for line in data.split(b"\n"):
        try:
            row = json.loads(line)
            for name in BY_REFERENCE:
                if isinstance(row.get(name), str):
                    row[name] = shared.get(row[name], {})
            result = adopt(row)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            continue
        found[result.cell_id] = result
    return text(list(found.values()))


def test_a_line_is_every_field_of_a_result_in_its_order() -> None:
    """A result's fields are its line's, in the line's order but the two it may share, held
    last (compat.json writes a cell's own after the rest)."""
    order = [name for name in LINE if name not in BY_REFERENCE]
    assert CellResult.__struct_fields__ == (*order, *BY_REFERENCE)
    assert BY_REFERENCE == ("fingerprint", "hardware")  # the two ``attempts`` puts in place


@settings(max_examples=examples(40), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results(), retried=st.lists(st.integers(0, 11), max_size=4))
def test_a_record_the_harness_wrote_is_read_into_the_rows_the_store_gives(
        tmp_path_factory: pytest.TempPathFactory, cells: list[CellResult],
        retried: list[int]) -> None:
    """Lines as the store writes them (values named in shared.jsonl, retries later in the
    record, each cell at its first place with its last attempt)."""
    store = RunStore.create(tmp_path_factory.mktemp("runs"), {"planned": []})
    store.extend(cells + [replace(cells[i], attempt=2, outcome=Outcome.PASS, duration=3,
                                  hardware={"cpu": "x"}) for i in retried if i < len(cells)])
    fast = store.results()
    assert text(fast) == by_json(store)
    if fast:  # the shared values put in place: one object per name, as the store has them
        assert all(isinstance(r.fingerprint, dict) for r in fast)


@pytest.mark.parametrize(("what", "line"), [
    ("a torn last line", b'{"run_id": "r", "cell_id": "c'),
    ("a blank line", b""),
    ("fields it does not know", _line(note="by hand")),
    ("a number where text goes", _line(environment=7)),
    ("an attempt as text", _line(attempt="2")),
    ("NaN", _line(duration=float("nan"))),
    ("a number out of a double's range", _line(details={"x": 1e300}).replace(b"1e+300",
                                                                                b"1e400")),
    ("a lone surrogate", _line(reason="\ud800")),
    ("bytes that are not UTF-8", _line()[:-1] + b', "reason": "caf\xe9"}'),
    ("two values on a line", _line() + b" " + _line(cell_id="c8")),
    ("nested deeper than msgspec goes", _line(details="here").replace(
        b'"here"', b"[" * 1015 + b"1" + b"]" * 1015)),
])
def test_a_line_the_harness_would_not_write_is_read_as_json_reads_it(
        tmp_path: Path, what: str, line: bytes) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED), cell("c2", "2.1.2", Outcome.PASS)])
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(line + b"\n" + _line(cell_id="c3") + b"\n")
    got = store.as_of(None, quiet=True).results()
    assert [r.cell_id for r in got][-1] == "c3", what
    if what != "nested deeper than msgspec goes":  # (deeper than json goes too)
        assert text(got) == by_json(store), what


@pytest.mark.parametrize(("what", "line"), [
    ("a whole-number duration and time", _line(duration=3, finished_at=1795665318)),
    ("a time past a double's precision", _line(finished_at=2 ** 53 + 1)),
    ("a carriage return between fields", _line().replace(b', "variant"', b',\r"variant"')),
    ("a name shared.jsonl lacks, a null machine", _line(fingerprint="feedfacefeedface",
                                                        hardware=None)),
    ("the same cell again", _line(cell_id="c1", outcome="PASS", attempt=2)),
    ("a key twice", _line()[:-1] + b', "variant": "w"}'),
    ("an optional field missing", json.dumps({k: v for k, v in json.loads(_line()).items()
                                              if k != "log"}).encode()),
    ("integers past 64 bits, a long fraction", _line(details={"n": 2 ** 70, "x": -2 ** 70},
                                                     duration=0.12345678901234567890)),
])
def test_lines_a_result_may_hold_are_read_as_the_store_reads_them(
        tmp_path: Path, what: str, line: bytes) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED), cell("c2", "2.1.2", Outcome.PASS)])
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(line + b"\n")
    assert text(store.results()) == by_json(store), what


def test_a_record_as_it_was_when_the_report_began(tmp_path: Path) -> None:
    """``as_of``: its first bytes alone, whatever a run still going has appended since; the
    last line without its newline read whole; no record, no rows."""
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED)])
    size = (store.run_dir / "results.jsonl").stat().st_size
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(_line(cell_id="c2"))  # whole, its newline not written yet
    then = store.as_of(size)
    assert text(then.results()) == by_json(then) and [r.cell_id for r in then.results()] == [
        "c1"]
    fast = store.results()
    assert [r.cell_id for r in fast] == ["c1", "c2"]
    assert text(fast) == by_json(store)
    assert RunStore(tmp_path / "nowhere").results() == []


def test_a_line_nested_deeper_than_any_json_reader_goes_is_named_not_a_traceback(
        tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([cell("c1", "2.0.1", Outcome.REPRODUCED)])
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(_line(details="here").replace(b'"here"', b"[" * 100_000) + b"\n")
    reading = store.as_of(None, quiet=True)
    assert [r.cell_id for r in reading.results()] == ["c1"]
    assert [(d.line, d.why) for d in reading.damaged] == [(2, "not JSON")]

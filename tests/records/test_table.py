from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.store import RunStore

TEXT = st.text(alphabet=st.sampled_from("ab:=<\t\n é::"), max_size=6)


@st.composite
def results(draw: st.DrawFn) -> list[CellResult]:
    fingerprints = draw(st.lists(st.one_of(st.just({}), st.fixed_dictionaries(
        {"key": st.dictionaries(TEXT, TEXT, max_size=3)},
        optional={"freeze_sha256": TEXT})), min_size=1, max_size=3))
    return [CellResult(
        run_id="r", cell_id=f"c{i}", environment=draw(TEXT),
        values=draw(st.dictionaries(TEXT, TEXT, max_size=2)), env_key="k", backend="uv",
        case_id=draw(TEXT), variant=draw(TEXT), nodeid="n", hardware_target=draw(TEXT),
        outcome=draw(st.sampled_from(Outcome)), signature=draw(st.none() | TEXT),
        duration=draw(st.floats(0, 1e6, allow_nan=False)), attempt=draw(st.integers(1, 3)),
        fingerprint=draw(st.sampled_from(fingerprints)))
        for i in range(draw(st.integers(0, 12)))]


def tabled(r: CellResult) -> CellResult:
    """``r`` as its table gives it back: no details nor machine; of its fingerprint, the key
    versions and the freeze hash."""
    fp = {"key": r.fingerprint.get("key"), "freeze_sha256": r.fingerprint.get("freeze_sha256")}
    return r.replace(details={}, hardware={}, fingerprint={k: v for k, v in fp.items() if v})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results())
def test_a_table_reads_back_the_rows_it_was_made_of(tmp_path: Path,
                                                     cells: list[CellResult]) -> None:
    (tmp_path / "results.jsonl").write_bytes(b"x" * len(cells))
    table.write(tmp_path, cells, table.stamp(tmp_path))
    found = table.current(tmp_path)
    assert found is not None
    assert found.rows() == [tabled(r) for r in cells]
    assert [r.versions for r in found.rows()] == [r.versions for r in cells]
    assert found.logical_keys() == [r.logical_key for r in cells]
    assert found.outcomes() == {r.logical_key: r.outcome for r in cells}
    assert found.durations_by_cell() == {r.cell_id: r.duration for r in cells if r.duration}
    assert found.column("attempt") == [r.attempt for r in cells]


def cell(run_id: str, cell_id: str, outcome: Outcome, attempt: int = 1) -> CellResult:
    return CellResult(run_id=run_id, cell_id=cell_id, environment="cpu:torch=2.4",
                      values={"torch": "2.4"}, env_key="k", backend="uv", case_id="probes",
                      variant="repro", nodeid="n", hardware_target="cpu", outcome=outcome,
                      attempt=attempt, duration=1.5,
                      fingerprint={"key": {"torch": "2.4.1"}, "freeze_sha256": "abc"})


def test_an_older_run_is_converted_once_on_first_read(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.FAIL), cell(store.run_id, "b", Outcome.PASS),
                  cell(store.run_id, "a", Outcome.PASS, attempt=2)])
    path = store.run_dir / table.CELLS
    assert not path.exists()
    first = table.read(store.run_dir)
    assert first.column("cell_id") == ["a", "b"]  # each cell once, at its first place
    assert first.column("outcome") == ["PASS", "PASS"]
    assert first.column("attempt") == [2, 1]
    assert first.rows()[0].versions == {"torch": "2.4.1", "(freeze)": "abc"}
    made = path.stat().st_mtime_ns
    size = str((store.run_dir / "results.jsonl").stat().st_size)
    with sqlite3.connect(path) as db:
        assert db.execute("select value from meta where name = 'record_size'").fetchone() == (
            size,)
    assert table.read(store.run_dir).column("cell_id") == ["a", "b"]
    assert path.stat().st_mtime_ns == made  # read, not made again
    assert table.read(store.run_dir, ["outcome"]).columns == ("outcome",)


def test_a_record_written_since_makes_the_table_again(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.FAIL)])
    assert table.read(store.run_dir).column("outcome") == ["FAIL"]
    store.extend([cell(store.run_id, "a", Outcome.PASS, attempt=2)])  # resumed
    assert table.current(store.run_dir) is None
    assert table.read(store.run_dir).column("outcome") == ["PASS"]
    (store.run_dir / table.CELLS).write_bytes(b"half a cop")  # not a table: made again
    assert table.read(store.run_dir).column("outcome") == ["PASS"]


def test_a_damaged_line_is_named_and_no_table_kept(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.PASS), cell(store.run_id, "b", Outcome.FAIL)])
    record = store.run_dir / "results.jsonl"
    lines = record.read_text().splitlines()
    record.write_text(lines[0] + "\n" + lines[1].replace('"environment":"cpu:torch=2.4"',
                                                         '"environment":7') + "\n")
    found = table.read(store.run_dir)
    assert found.column("cell_id") == ["a"]
    assert f"{record}: line 2:" in capsys.readouterr().err
    assert not (store.run_dir / table.CELLS).exists()  # each reader reads it, and says so


def test_a_folder_without_a_record_reads_as_no_cells(tmp_path: Path) -> None:
    assert len(table.read(tmp_path)) == 0
    assert not (tmp_path / table.CELLS).exists()


def test_the_table_refuses_an_outcome_the_harness_does_not_know(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.PASS)])
    table.read(store.run_dir)
    with sqlite3.connect(store.run_dir / table.CELLS) as db:
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            db.execute("update results set outcome = 'GREAT'")
        with pytest.raises(sqlite3.IntegrityError, match="duration"):
            db.execute("update results set duration = 'slow'")  # STRICT: a type a column


def test_versions_and_axis_values_are_queryable_as_json(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.PASS)])
    table.read(store.run_dir)
    with sqlite3.connect(store.run_dir / table.CELLS) as db:
        assert db.execute("select cell_id from cells where versions ->> '$.torch' = '2.4.1'"
                          " and axes ->> '$.torch' = '2.4'").fetchall() == [("a",)]


def test_a_kill_while_writing_leaves_the_old_table(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.FAIL)])
    table.read(store.run_dir)
    store.extend([cell(store.run_id, "a", Outcome.PASS, attempt=2)])

    def killed(*_: object) -> None:
        raise OSError("no space left")

    monkeypatch.setattr(Path, "replace", killed)
    assert not table.write(store.run_dir, store.results(), table.stamp(store.run_dir))
    assert [p.name for p in store.run_dir.iterdir() if p.name.startswith(".")] == []
    with sqlite3.connect(store.run_dir / table.CELLS) as db:
        assert db.execute("select outcome from cells").fetchall() == [("FAIL",)]


def test_text_utf8_cannot_hold_is_kept_as_its_escape(tmp_path: Path) -> None:
    """A lone surrogate (a hand edit the record reads) leaves the table written, the text
    escaped, not the run without a table."""
    store = RunStore.create(tmp_path, {})
    store.extend([replace(cell(store.run_id, "a", Outcome.PASS), reason="x\udc80")])
    assert table.read(store.run_dir).column("reason") == ["x\\udc80"]
    assert table.current(store.run_dir) is not None


def test_an_environments_columns_are_kept_once_and_the_view_gives_every_column(
        tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([replace(cell(store.run_id, f"t{i}", Outcome.PASS), variant=f"t.py::t{i}",
                          nodeid=f"t.py::t{i}") for i in range(3)]
                 + [cell(store.run_id, "a", Outcome.FAIL)])
    table.read(store.run_dir)
    with sqlite3.connect(store.run_dir / table.CELLS) as db:
        assert db.execute("select count(*) from environments").fetchone() == (1,)
        # a suite's test, whose node id is its variant, holds none of its own
        assert db.execute("select nodeid from results order by place").fetchall() == [
            (None,), (None,), (None,), ("n",)]
        found = db.execute("select * from cells order by place")
        assert tuple(d[0] for d in found.description) == ("place", *table.NAMES)
        rows = found.fetchall()
    assert [r[table.NAMES.index("nodeid") + 1] for r in rows] == [
        "t.py::t0", "t.py::t1", "t.py::t2", "n"]
    assert {r[table.NAMES.index("env_key") + 1] for r in rows} == {"k"}


def test_a_table_of_the_format_before_is_made_again(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {})
    store.extend([cell(store.run_id, "a", Outcome.FAIL)])
    table.read(store.run_dir)
    with sqlite3.connect(store.run_dir / table.CELLS) as db:
        db.execute("update meta set value = '2' where name = 'format'")
    assert table.current(store.run_dir) is None
    assert table.read(store.run_dir).column("outcome") == ["FAIL"]
    assert table.current(store.run_dir) is not None

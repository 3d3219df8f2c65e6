"""The columns a merge writes beside the snapshot for its report (``records.report_rows``):
taken only when made from the record as the report finds it and whole, and a report made
from them is the report made from the record. (That they read as the record reads, value for
value, over every kind of merge: ``test_merge_verbatim.assert_report_rows_read_as_the_record``.)
"""

from __future__ import annotations

import filecmp
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.core.results import Outcome, ResultRow
from harness.records import lines, report_rows, snapshot
from harness.records.store import RunStore
from harness.report import build
from tests.conftest import examples
from tests.records.test_lines import text
from tests.records.test_snapshot import _line, cell


def merged(tmp_path: Path, *, no_report: bool = False, durations: float = 1.5) -> Path:
    """Two shards merged by the command (its report made); the merged run's folder."""
    shards = []
    for name, cells in (("s1", [cell("a", "2.0.1", Outcome.PASS),
                                cell("b", "2.1.2", Outcome.REPRODUCED, variant="w")]),
                        ("s2", [cell("c", "2.2.2", Outcome.SKIP)])):
        store = RunStore.create(tmp_path, {"planned": []}, run_id=name)
        store.extend([replace(c, duration=durations) for c in cells])
        shards.append(str(store.run_dir))
    assert main(["--reports", str(tmp_path), "merge", *shards, "--run-id", "m"]
                + (["--no-report"] if no_report else [])) == 0
    return tmp_path / "runs" / "m"


def current(run_dir: Path) -> snapshot.Stamp:
    found = snapshot.stamp(run_dir)
    assert found is not None
    return found


def test_a_merge_that_makes_its_report_leaves_its_rows(tmp_path: Path) -> None:
    run = merged(tmp_path)
    found = report_rows.read(run, current(run))
    assert found is not None and text(found) == text(lines.result_rows(RunStore(run)) or [])
    assert [r.cell_id for r in found] == ["a", "b", "c"]


def test_a_merge_without_its_report_leaves_none(tmp_path: Path) -> None:
    run = merged(tmp_path, no_report=True)
    assert snapshot.is_current(run) and not (run / report_rows.FILE).exists()


def assert_reports_alike(run: Path, out: Path, monkeypatch: pytest.MonkeyPatch,
                         previous: RunStore | None = None) -> None:
    """The run's report made from the columns (the record not read) is, file for file and
    byte for byte, the report made from the record."""
    with monkeypatch.context() as patched:
        patched.setattr(build, "result_rows", _refused)
        build.write_report(RunStore(run), out / "with", previous=previous)
    (run / report_rows.FILE).unlink()
    build.write_report(RunStore(run), out / "without", previous=previous)
    names = sorted(p.name for p in (out / "with").iterdir())
    assert names == sorted(p.name for p in (out / "without").iterdir())
    same, different, errors = filecmp.cmpfiles(out / "with", out / "without", names,
                                               shallow=False)
    assert different == errors == [] and len(same) > 5


def _refused(store: RunStore) -> None:
    raise AssertionError("the record was read")


def test_a_report_from_the_columns_is_the_report_from_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = merged(tmp_path)
    before = RunStore.create(tmp_path, {"planned": []}, run_id="night-1")
    before.extend([cell("a", "2.0.1", Outcome.FAIL), cell("c", "2.2.2", Outcome.SKIP)])
    assert_reports_alike(run, tmp_path / "r", monkeypatch, previous=before)


#: Where JSON's numbers part ways: past 64 bits, past a double's integers, 1e16, -0.0.
EDGES = st.sampled_from([2 ** 64, -2 ** 63 - 1, 2 ** 70, 2 ** 53 + 1, 1e16, 0.1, -0.0, 1.0])
NUMBER = st.one_of(EDGES, st.integers(-2 ** 70, 2 ** 70),
                   st.floats(allow_nan=False, allow_infinity=False))
JSON = st.recursive(st.none() | st.booleans() | NUMBER | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8)


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.fixed_dictionaries({
    "details": st.dictionaries(st.text(max_size=3), JSON, max_size=3),
    "duration": st.one_of(EDGES, st.integers(0, 2 ** 70), st.floats(0, 1e20)),
    "finished_at": NUMBER, "gpu": st.none() | st.integers(0, 2 ** 66),
    "attempt": st.integers(1, 3), "infra": st.booleans(), "shard": st.integers(0, 1)}),
    min_size=1, max_size=6))
def test_any_values_a_merged_record_holds_make_the_same_report_from_the_columns(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        cells: list[dict[str, object]]) -> None:
    """Numbers of any size and type, anything in ``details``, across shards (a shard
    holding a run of 19 digits has each of its lines written again by the merge)."""
    tmp = tmp_path_factory.mktemp("rows")
    stores = [RunStore.create(tmp, {"planned": []}, run_id=f"s{i}") for i in range(2)]
    for i, drawn in enumerate(cells):
        shard = int(drawn.pop("shard"))  # type: ignore[call-overload]
        stores[shard].extend([replace(cell(f"c{i}", "2.0.1", Outcome.PASS), **drawn)])
    assert main(["--reports", str(tmp), "merge", *(str(s.run_dir) for s in stores),
                 "--run-id", "m", "--no-report"]) == 0
    run = tmp / "runs" / "m"
    made_from = current(run)
    rows = lines.result_rows(RunStore(run))
    assert rows is not None  # what the harness writes, it reads
    document = report_rows.encode(rows_as_lines(run))
    assert document is not None and report_rows.write(run, document, made_from)
    found = report_rows.read(run, made_from)
    assert found is not None and text(found) == text(rows)
    assert_reports_alike(run, tmp / "r", monkeypatch)


def rows_as_lines(run: Path) -> list[ResultRow]:
    """The merged record's lines as ``lines.DECODER`` decodes them (names not in place), as
    a merge holds them (``MergeReport.as_read``)."""
    return [lines.DECODER.decode(line)
            for line in (run / "results.jsonl").read_bytes().splitlines()]


def test_an_integer_duration_past_64_bits_stays_an_integer(tmp_path: Path) -> None:
    """The snapshot's durations are read by orjson, which makes such a one a float: the
    columns hold every number themselves."""
    run = merged(tmp_path, durations=2 ** 64)
    found = report_rows.read(run, current(run))
    assert found is not None and {type(r.duration) for r in found} == {int}
    assert text(found) == text(lines.result_rows(RunStore(run)) or [])


def test_nesting_past_msgspecs_depth_writes_no_columns_and_reads_none(tmp_path: Path) -> None:
    deep: object = 1
    for _ in range(1100):
        deep = [deep]
    row = lines.DECODER.decode(_line(details={"x": 1}))
    row.details = {"x": deep}
    assert report_rows.encode([row]) is None
    run = merged(tmp_path)
    head = (run / report_rows.FILE).read_bytes().split(b"\n", 1)[0]
    (run / report_rows.FILE).write_bytes(head + b"\n" + b"[" * 1100 + b"]" * 1100)
    assert report_rows.read(run, current(run)) is None


def test_a_record_that_moved_on_is_read_as_it_was(tmp_path: Path) -> None:
    """Appended to after the merge (or after the report looked): the columns are another
    state's, and the report reads the record as it found it."""
    run = merged(tmp_path)
    then = current(run)
    with open(run / "results.jsonl", "ab") as fh:
        fh.write(_line(cell_id="d") + b"\n")
    assert report_rows.read(run, then) is None  # the record is not as the report found it
    assert report_rows.read(run, current(run)) is None  # the columns are not the record's


def _document(run: Path) -> dict[str, object]:
    body = (run / report_rows.FILE).read_bytes().split(b"\n", 1)[1]
    return json.loads(body)  # type: ignore[no-any-return]


def _rewrite(run: Path, document: dict[str, object]) -> None:
    head = (run / report_rows.FILE).read_bytes().split(b"\n", 1)[0]
    (run / report_rows.FILE).write_bytes(head + b"\n" + json.dumps(document).encode())


@pytest.mark.parametrize(("what", "change"), [
    ("a code past its table", lambda d: d["reason"]["codes"].__setitem__(0, 9)),
    ("a negative code", lambda d: d["node"]["codes"].__setitem__(0, -1)),
    ("a column short", lambda d: d["log"].pop()),
    ("a table's codes short", lambda d: d["details"]["codes"].pop()),
    ("another count of cells", lambda d: d.__setitem__("cells", 2)),
    ("a number where text goes", lambda d: d["run_id"]["table"].__setitem__(0, 7)),
    ("an attempt as text", lambda d: d["attempt"].__setitem__(0, "1")),
    ("a column missing", lambda d: d.pop("infra")),
    ("a column more", lambda d: d.__setitem__("note", [])),
])
def test_a_damaged_file_is_not_taken_for_the_runs(tmp_path: Path, what: str,
                                                  change: object) -> None:
    run = merged(tmp_path)
    document = _document(run)
    change(document)  # type: ignore[operator]
    _rewrite(run, document)
    assert report_rows.read(run, current(run)) is None, what


def test_a_cut_file_or_a_stale_snapshot_is_not_taken(tmp_path: Path) -> None:
    run = merged(tmp_path)
    whole = (run / report_rows.FILE).read_bytes()
    (run / report_rows.FILE).write_bytes(whole[:-10])
    assert report_rows.read(run, current(run)) is None
    (run / report_rows.FILE).write_bytes(whole)
    assert report_rows.read(run, current(run)) is not None
    (run / snapshot.SNAPSHOT).write_bytes(b"# another record's\n")
    assert report_rows.read(run, current(run)) is None


def test_names_shared_jsonl_lacks_read_as_the_record_reads_them(tmp_path: Path) -> None:
    """A fingerprint named but not in shared.jsonl: {} (``lines.in_place``)."""
    run = merged(tmp_path)
    (run / "shared.jsonl").write_bytes(b"")
    found = report_rows.read(run, current(run))
    assert found is not None and {type(r.fingerprint) for r in found} == {dict}
    assert text(found) == text(lines.result_rows(RunStore(run)) or [])


def test_a_record_that_moves_on_while_read_is_not_made_of_two_states(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry appended (and the snapshot made again) between the columns' reading and the
    snapshot's: rows of the one with numbers of the other would be rows of neither."""
    run = merged(tmp_path)
    then = current(run)
    read = snapshot.read

    def moving(run_dir: Path) -> snapshot.Snapshot | None:
        monkeypatch.setattr(snapshot, "read", read)  # once
        with open(run_dir / "results.jsonl", "ab") as fh:
            fh.write(_line(cell_id="a", outcome="FAIL", attempt=2) + b"\n")
        return snapshot.load(run_dir)  # made again, of the record as it is now

    monkeypatch.setattr(snapshot, "read", moving)
    assert report_rows.read(run, then) is None

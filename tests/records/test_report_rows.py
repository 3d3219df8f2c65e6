"""The columns a merge writes beside the snapshot for its report (``records.report_rows``):
taken only when made from the record as the report finds it and whole, and a report made
from them is the report made from the record. (That they read as the record reads, value for
value, over every kind of merge: ``test_merge_verbatim.assert_report_rows_read_as_the_record``.)
"""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.core.results import Outcome
from harness.records import lines, report_rows, snapshot
from harness.records.store import RunStore
from harness.report import build
from tests.records.test_lines import text
from tests.records.test_snapshot import _line, cell


def merged(tmp_path: Path, *, no_report: bool = False) -> Path:
    """Two shards merged by the command; the merged run's folder."""
    shards = []
    for name, cells in (("s1", [cell("a", "2.0.1", Outcome.PASS),
                                cell("b", "2.1.2", Outcome.REPRODUCED, variant="w")]),
                        ("s2", [cell("c", "2.2.2", Outcome.SKIP)])):
        store = RunStore.create(tmp_path, {"planned": []}, run_id=name)
        store.extend(cells)
        shards.append(str(store.run_dir))
    assert main(["--reports", str(tmp_path), "merge", *shards, "--run-id", "m"]
                + (["--no-report"] if no_report else [])) == 0
    return tmp_path / "runs" / "m"


def current(run_dir: Path) -> snapshot.Stamp:
    found = snapshot.stamp(run_dir)
    assert found is not None
    return found


def test_a_merge_that_makes_its_report_leaves_its_rows_and_its_report_reads_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = merged(tmp_path)
    found = report_rows.read(run, current(run))
    assert found is not None and text(found) == text(lines.result_rows(RunStore(run)) or [])
    assert [r.cell_id for r in found] == ["a", "b", "c"]

    def refused(store: RunStore) -> None:
        raise AssertionError("the record was read")

    monkeypatch.setattr(build, "result_rows", refused)
    build.write_report(RunStore(run), tmp_path / "again")  # from the columns alone


def test_a_merge_without_its_report_leaves_none(tmp_path: Path) -> None:
    run = merged(tmp_path, no_report=True)
    assert snapshot.is_current(run) and not (run / report_rows.FILE).exists()


def test_a_report_from_the_columns_is_the_report_from_the_record(tmp_path: Path) -> None:
    run = merged(tmp_path)
    with_rows = build.write_report(RunStore(run), tmp_path / "with")
    (run / report_rows.FILE).unlink()
    without = build.write_report(RunStore(run), tmp_path / "without")
    assert set(with_rows) == set(without)
    names = sorted(p.name for p in (tmp_path / "with").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "without").iterdir())
    same, different, errors = filecmp.cmpfiles(tmp_path / "with", tmp_path / "without",
                                               names, shallow=False)
    assert different == errors == [] and len(same) > 5


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

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.table import LETTER


def cell(i: int, outcome: Outcome) -> CellResult:
    return CellResult(run_id="r", cell_id=f"c{i}", environment=f"e{i % 3}", values={},
                      env_key="k", backend="uv", case_id="case", variant=f"v{i}", nodeid="n",
                      hardware_target="cpu", outcome=outcome)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(outcomes=st.lists(st.sampled_from(Outcome), max_size=40))
def test_a_runs_outcomes_read_as_one_letter_a_cell_in_the_records_order(
        tmp_path: Path, outcomes: list[Outcome]) -> None:
    cells = [cell(i, o) for i, o in enumerate(outcomes)]
    (tmp_path / "results.jsonl").write_bytes(b"x" * len(cells))
    assert table.write(tmp_path, cells, table.stamp(tmp_path))
    digest = table.read(tmp_path, ()).keys_digest
    assert table.letters(tmp_path) == (digest, "".join(LETTER[o] for o in outcomes))


def test_no_letters_from_a_table_older_than_its_record(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text("x")
    assert table.letters(tmp_path) is None  # no table yet
    assert table.write(tmp_path, [cell(0, Outcome.FAIL)], table.stamp(tmp_path))
    assert table.letters(tmp_path) == (table.read(tmp_path, ()).keys_digest, "F")
    (tmp_path / "results.jsonl").write_text("xy")  # the record written since
    assert table.letters(tmp_path) is None


def test_a_runs_logical_keys_read_as_rows_that_are_the_keys(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text("x")
    assert table.logical_keys(tmp_path) is None  # no table yet
    cells = [cell(i, Outcome.PASS) for i in range(5)]
    assert table.write(tmp_path, cells, table.stamp(tmp_path))
    found = table.logical_keys(tmp_path)
    assert found == [r.logical_key for r in cells] == table.read(
        tmp_path, table.KEYED).logical_keys()
    assert found[1] == ("e1", "case::v1", "cpu")
    (tmp_path / "results.jsonl").write_text("xy")  # the record written since
    assert table.logical_keys(tmp_path) is None

"""``adopt``: a record's line made a ``CellResult`` in place; a line with exactly the fields
skips the checks, any other goes the checked way."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from msgspec.structs import asdict

from harness.core.results import CellResult, Outcome, adopt, as_rows, labels, logical_keys

FULL = CellResult(run_id="r", cell_id="c1", environment="e", values={"torch": "2.1.2"},
                  env_key="k", backend="uv", case_id="case", variant="v", nodeid="t.py::t",
                  hardware_target="cpu", outcome=Outcome.FAIL, reason="boom",
                  fingerprint={"python": "3.11"}, log="logs/c1.log", attempt=2, gpu=0)


def line(**changes: Any) -> dict[str, Any]:
    row = FULL.to_dict()
    row.update(changes)
    return row


def test_a_line_with_every_field_and_no_other_is_the_result_it_was() -> None:
    got = adopt(line())
    assert got == FULL and got.outcome is Outcome.FAIL
    assert list(vars(got)) == [f.name for f in fields(CellResult)]


def test_an_unknown_field_in_place_of_a_known_one_is_dropped_and_the_default_filled() -> None:
    """As many keys as fields, not the same ones: the checked way, not the fast one."""
    row = line(extra="from a later harness")
    del row["caveat"]
    got = adopt(row)
    assert got == FULL and "extra" not in vars(got) and got.caveat == ""
    assert set(vars(got)) == {f.name for f in fields(CellResult)}


@pytest.mark.parametrize("name", ["details", "node", "parent", "gpu"])
def test_a_line_without_an_optional_field_gets_its_default(name: str) -> None:
    row = line()
    del row[name]
    got = adopt(row)
    assert set(vars(got)) == {f.name for f in fields(CellResult)}
    default: Any = {"details": {}, "node": "", "parent": "", "gpu": None}[name]
    assert getattr(got, name) == default


def test_a_line_without_a_required_field_is_refused() -> None:
    row = line()
    del row["cell_id"]
    with pytest.raises(KeyError, match="without cell_id"):
        adopt(row)
    with pytest.raises(KeyError):
        adopt(line(outcome="NOT-AN-OUTCOME"))


def test_a_result_as_a_row_holds_every_field_and_reads_the_same() -> None:
    built = replace(FULL, outcome=Outcome.ERROR, fingerprint={})
    for result in (FULL, built, adopt(line(parent="s1"))):
        (row,) = as_rows([result])
        assert sorted(row.__struct_fields__) == sorted(f.name for f in fields(CellResult))
        assert asdict(row) == vars(result)  # every field, as the result holds it
        assert (row.unbuilt, row.logical_key) == (result.unbuilt, result.logical_key)
    assert as_rows([built])[0].unbuilt and not as_rows([FULL])[0].unbuilt


class Tagged(str):
    def __str__(self) -> str:
        return "tagged!"


def test_logical_keys_made_together_are_each_ones_logical_key() -> None:
    """In C for texts; a number or a str subclass (its own __str__) as the f-string writes it."""
    odd = [replace(FULL, case_id=Tagged("c")), replace(FULL, variant=1),  # type: ignore[arg-type]
           replace(FULL, variant=True), FULL]  # type: ignore[arg-type]
    assert logical_keys(odd) == [r.logical_key for r in odd]
    assert logical_keys(odd)[0][1].startswith("tagged!::")
    assert labels([FULL, FULL]) == [FULL.logical_key[1]] * 2

"""``adopt``: a record's line that msgspec refuses made a ``CellResult``, its fields checked.
The same type is what msgspec decodes a line into."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from harness.core import jsonio
from harness.core.results import LINE, CellResult, Outcome, adopt, labels, logical_keys

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
    assert list(got.to_dict()) == list(LINE) == list(FULL.to_dict())


def test_an_unknown_field_in_place_of_a_known_one_is_dropped_and_the_default_filled() -> None:
    """As many keys as fields, not the same ones."""
    row = line(extra="from a later harness")
    del row["caveat"]
    got = adopt(row)
    assert got == FULL and not hasattr(got, "extra") and got.caveat == ""
    assert list(got.to_dict()) == list(LINE)


@pytest.mark.parametrize("name", ["details", "node", "parent", "gpu"])
def test_a_line_without_an_optional_field_gets_its_default(name: str) -> None:
    row = line()
    del row[name]
    default: Any = {"details": {}, "node": "", "parent": "", "gpu": None}[name]
    got = adopt(dict(row))
    assert getattr(got, name) == default
    # msgspec, decoding the line against the schema, reads it the same
    assert msgspec.json.decode(jsonio.dumps(row), type=CellResult) == got


def test_a_line_without_a_required_field_is_refused() -> None:
    row = line()
    del row["cell_id"]
    with pytest.raises(KeyError, match="without cell_id"):
        adopt(row)
    with pytest.raises(KeyError):
        adopt(line(outcome="NOT-AN-OUTCOME"))


def test_one_type_from_run_to_report() -> None:
    """The result run/ makes is the one a line decodes into: frozen, its fields checked."""
    built = FULL.replace(outcome=Outcome.ERROR, fingerprint={})
    for result in (FULL, built, adopt(line(parent="s1"))):
        decoded = msgspec.json.decode(jsonio.dumps(result.to_dict()), type=CellResult)
        assert decoded == result and decoded.to_dict() == result.to_dict()
        assert (decoded.unbuilt, decoded.logical_key) == (result.unbuilt, result.logical_key)
    assert built.unbuilt and not FULL.unbuilt
    with pytest.raises(AttributeError):
        FULL.outcome = Outcome.PASS  # type: ignore[misc]
    with pytest.raises(msgspec.ValidationError, match="environment"):
        msgspec.json.decode(jsonio.dumps(line(environment=7)), type=CellResult)


class Tagged(str):
    def __str__(self) -> str:
        return "tagged!"


def test_logical_keys_made_together_are_each_ones_logical_key() -> None:
    """In C for texts; a number or a str subclass (its own __str__) as the f-string writes it."""
    odd = [FULL.replace(case_id=Tagged("c")), FULL.replace(variant=1),
           FULL.replace(variant=True), FULL]
    assert logical_keys(odd) == [r.logical_key for r in odd]
    assert logical_keys(odd)[0][1].startswith("tagged!::")
    assert labels([FULL, FULL]) == [FULL.logical_key[1]] * 2


def test_hand_written_axis_values_are_read_as_text_as_the_table_holds_them() -> None:
    """The schema's type for axis values; a line msgspec refuses for a number there reads the
    same through ``adopt`` as through the run's table (``str``)."""
    got = adopt(line(values={"torch": 2.1, "fp8": True}))
    assert got.values == {"torch": "2.1", "fp8": "True"}
    assert adopt(line(values=None)).values == {}

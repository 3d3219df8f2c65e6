"""compat.csv is, byte for byte, what ``csv.writer`` writes of the same columns."""

from __future__ import annotations

import csv
import io
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.report import csvfile
from harness.report.csvfile import write_csv
from tests.conftest import examples


class Kind(str, Enum):
    A = "a,b"


class Tagged(str):
    def __str__(self) -> str:
        return "tagged!"


TEXTS = st.text(alphabet=st.sampled_from(list('ab1,"\r\n \t-_./:é\x00\u2028=~')), max_size=6)
VALUES = st.one_of(TEXTS, st.none(), st.integers(-3, 3), st.booleans(),
                   st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1, 1.0, True]))


def by_csv(path: Path, columns: dict[str, list[Any]]) -> bytes:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(zip(*columns.values(), strict=True))
    return path.read_bytes()


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(TEXTS, max_size=5, unique=True), rows=st.integers(0, 7), data=st.data())
def test_the_file_is_what_csv_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     names: list[str], rows: int, data: st.DataObject) -> None:
    """Any texts (quotes, commas, line breaks, a lone empty field), None, numbers that are
    equal but written differently (1, 1.0, True), in columns of one type or mixed, over
    chunks of any size."""
    monkeypatch.setattr(csvfile, "_ROWS", data.draw(st.sampled_from([1, 2, 5000])))
    columns = {name: data.draw(st.lists(st.one_of(TEXTS, VALUES) if data.draw(st.booleans())
                                        else TEXTS, min_size=rows, max_size=rows))
               for name in names}
    write_csv(tmp_path / "ours.csv", columns)
    assert (tmp_path / "ours.csv").read_bytes() == by_csv(tmp_path / "csv.csv", columns)


def test_what_is_written_without_asking_csv_is_what_csv_writes_as_it_is() -> None:
    """``_PLAIN``'s characters: csv quotes and escapes none of them, wherever they stand."""
    plain = "AZaz09_.:/@+=~-"
    assert csvfile._PLAIN.fullmatch(plain)
    for char in plain:
        for text in (char, f"x{char}", f"{char}x", f"x{char}y"):
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerow([text, ""])
            assert out.getvalue() == f"{text},\n"
    assert not any(csvfile._PLAIN.fullmatch(t) for t in ("a b", "a,b", 'a"b', "a\rb", "é"))


@pytest.mark.parametrize("values", [
    [1.5, 2.0, -0.0, float("nan"), float("inf"), 1e16, 1e-7, 0.1 + 0.2],  # repr, as csv
    [0, -3, 10**20, 7],  # str
    [True, False, 1, 1.0],  # equal keys, three texts
    ["ab12", "logs/x-batch.log", "", "::", "a:b/c=d~e+f@g"],  # all plain: as they are
    ["plain", "a,b", 'say "hi"', "line\nbreak", "cr\r", " lead", "é"],  # some quoted
    [None, "x", None],
    [Kind.A, Tagged("x"), "plain"],  # a str's own characters, whatever its __str__
    [Kind.A, Kind.A],
])
def test_a_column_of_one_kind_is_written_as_csv_writes_it(tmp_path: Path,
                                                          values: list[Any]) -> None:
    columns = {"a": values, "b,c": list(reversed(values))}
    write_csv(tmp_path / "ours.csv", columns)
    assert (tmp_path / "ours.csv").read_bytes() == by_csv(tmp_path / "csv.csv", columns)

"""compat.csv reads back, through ``csv``, as the texts its columns held."""

from __future__ import annotations

import csv
from itertools import chain
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.report.writers import write_csv
from tests.conftest import examples

TEXTS = st.text(alphabet=st.sampled_from(list('ab1,"\n\r \t-_./:é\x00\u2028=~')), max_size=6)


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(TEXTS, min_size=1, max_size=5, unique=True), rows=st.integers(0, 7),
       data=st.data())
def test_any_texts_read_back_as_they_were(tmp_path: Path, names: list[str], rows: int,
                                          data: st.DataObject) -> None:
    """Quotes, commas, line breaks (a lone CR too), a lone empty field: each row reads back
    whole, and each ends in "\n"."""
    columns = {name: data.draw(st.lists(TEXTS, min_size=rows, max_size=rows)) for name in names}
    write_csv(tmp_path / "compat.csv", columns)
    with open(tmp_path / "compat.csv", encoding="utf-8", newline="") as fh:
        header, *lines = csv.reader(fh)
    assert header == names
    assert lines == [list(row) for row in zip(*columns.values(), strict=True)]
    text = (tmp_path / "compat.csv").read_bytes()
    assert text.endswith(b"\n") and text.count(b"\r\n") == sum(
        v.count("\r\n") for v in [*names, *chain.from_iterable(columns.values())])

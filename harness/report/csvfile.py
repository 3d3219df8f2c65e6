"""compat.csv: the long table, column by column, in the bytes of ``csv.writer`` writing its rows
(lineterminator "\\n"); each distinct text is escaped once, by ``csv`` itself."""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.report.data import Report

#: Characters ``csv`` never quotes or escapes in this dialect: a text of these alone is
#: written as it is (hex cell ids, most log paths).
_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+=~-]*")
_ROWS = 5000  # rows written at a time


def _escape(text: str) -> str:
    """The field ``csv`` writes for ``text`` (made by ``csv``)."""
    if _PLAIN.fullmatch(text):
        return text
    out = io.StringIO()
    # Two fields, the second empty: a row of one empty field would be written '""'.
    csv.writer(out, lineterminator="\n").writerow([text, ""])
    return out.getvalue()[:-2]


def _text(value: Any) -> str:
    """A field's text as ``csv`` makes it: a text's own characters (a str subclass's too,
    whatever its ``__str__``), "" for None, ``repr`` for a float, else ``str``."""
    if isinstance(value, str):
        return str.__str__(value)
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _fields(values: Sequence[Any], escaped: Callable[[str], str]) -> list[str]:
    """A column's fields: converted in C where it is of one type (csv: ``repr`` of a float,
    ``str`` of an int); as they are where the whole column is plain text (checked in one
    match: ids, paths, times), else each text escaped once and looked up."""
    kinds = set(map(type, values))
    if kinds <= {str}:
        texts = values
    elif kinds <= {float}:
        texts = list(map(float.__repr__, values))
    elif kinds <= {int}:
        texts = list(map(int.__repr__, values))
    else:  # None, booleans, a mix: 1, 1.0 and True are one key of a dict, three texts
        texts = list(map(_text, values))
    if _PLAIN.fullmatch("".join(texts)):
        return list(texts)
    return list(map(escaped, texts))


def write_csv(path: Path, columns: Mapping[str, Sequence[Any]]) -> None:
    """The header (the columns' names), then a line per row of ``columns`` (of one length)."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        if len(columns) < 2:  # a row of one empty field is '""': csv's own rule, kept by csv
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(zip(*columns.values(), strict=True))
            return
        escaped = functools.cache(_escape)  # each distinct text escaped once
        fields = [_fields(values, escaped) for values in columns.values()]
        fh.write(",".join(escaped(_text(name)) for name in columns) + "\n")
        for start in range(0, len(fields[0]), _ROWS):
            chunk = zip(*(f[start:start + _ROWS] for f in fields), strict=True)
            fh.write("\n".join(map(",".join, chunk)) + "\n")


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """The report's compat.csv."""
    write_csv(out_dir / "compat.csv", report.columns)
    return {"csv": out_dir / "compat.csv"}

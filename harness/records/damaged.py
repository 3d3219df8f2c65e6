"""Lines of a record that are no result (torn, not JSON, a field of another type, an outcome
the harness does not know): left out by every reader, each named on stderr (file, line,
why) and counted in the report's header, never a traceback and never a silent drop."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from harness.core.results import damage

#: How many damaged lines of one reading are named; the rest are counted.
NAMED = 10
_WARNED: set[Damaged] = set()  # (a command reading one record twice says each once)


class Damaged(NamedTuple):
    path: Path
    line: int  # from 1
    why: str

    def __str__(self) -> str:
        return f"{self.path}: line {self.line}: {self.why}"


def scan(path: Path, size: int | None = None) -> list[Damaged]:
    """Each damaged line of the record at ``path`` (``size``: its first bytes alone), as
    readers leave them out; a blank line is none (line by line: read only where one is)."""
    with open(path, "rb") as fh:
        data = fh.read() if size is None else fh.read(size)
    found = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            why = damage(json.loads(line))
        except ValueError:
            why = "torn (its end never written)" if number > data.count(b"\n") else "not JSON"
        if why is not None:
            found.append(Damaged(path, number, why))
    return found


def warn(found: Sequence[Damaged]) -> None:
    """A warning on stderr for each of the first ``NAMED`` (once a process), then a count."""
    found = [d for d in found if d not in _WARNED]
    _WARNED.update(found)
    for damaged in found[:NAMED]:
        print(f"harness: warning: {damaged}; the line is left out", file=sys.stderr)
    if len(found) > NAMED:
        print(f"harness: warning: {len(found) - NAMED} more damaged lines left out",
              file=sys.stderr)


def said(count: int) -> str:
    """The report header's words for ``count`` damaged lines ("" for none)."""
    return f"{count} damaged line{'s' if count != 1 else ''} left out" if count else ""

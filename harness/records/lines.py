"""A result line as msgspec reads it, for readers that need no ``CellResult`` of it: a merge
passing a shard's lines through (``merge``), a report's site reading each cell as a row.

``ResultLine`` requires every field a result has and allows no other, so a line it takes
holds what ``adopt`` would keep, no more and no less: written as it is, the line means that
result. Every field is typed as the harness writes it and decoded (none skipped as raw
text), so msgspec refuses what orjson refuses (bytes that are not UTF-8, a lone surrogate,
NaN, a number out of a double's range) and reads what it takes as json does (``int |
float``: an integer stays one, of any length). Where msgspec refuses a line, the caller
reads it the way ``RunStore`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from harness.core.results import Outcome, ResultRow, logical_key
from harness.records import codec
from harness.records.layout import RESULTS
from harness.records.store import RunStore, read_shared


class ResultLine(msgspec.Struct, forbid_unknown_fields=True):
    """A result line, decoded (the fields in ``CellResult``'s order)."""

    run_id: str
    cell_id: str
    environment: str
    values: dict[str, str]
    env_key: str
    backend: str
    case_id: str
    variant: str
    nodeid: str
    hardware_target: str
    outcome: Outcome
    reason: str
    signature: str | None
    fingerprint: Any  # a name in shared.jsonl, or the value
    hardware: Any
    details: Any
    duration: int | float
    log: str | None
    finished_at: int | float
    caveat: str
    attempt: int
    node: str
    gpu: int | None
    infra: bool
    parent: str

    @property
    def logical_key(self) -> tuple[str, str, str]:
        return logical_key(self.environment, self.case_id, self.variant, self.hardware_target)


DECODER = msgspec.json.Decoder(ResultLine)
#: What ``DECODER`` raises for a line it does not take (RecursionError: nested deeper than
#: msgspec goes, where orjson still reads it).
REFUSED = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def result_rows(store: RunStore) -> list[ResultRow] | None:
    """Each cell of ``store``'s record once, its last attempt at its first place, as
    ``as_rows(store.results())`` gives them (up to ``store.upto``), read straight into rows:
    or None where any line is not one result as the harness writes it (torn, blank, by
    hand), for the caller to read the record as ``RunStore`` does. A MiB at
    a time (``codec.CHUNK``), as the store reads it: a fleet's record whole, with its
    lines, was a report's peak."""
    path = store.run_dir / RESULTS
    last: dict[str, ResultLine] = {}
    try:
        with open(path, "rb") as fh:
            rest, left = b"", store.upto
            while block := fh.read(codec.CHUNK if left is None else min(codec.CHUNK, left)):
                if left is not None:
                    left -= len(block)
                block = rest + block
                *whole, rest = block.split(b"\n")
                for line in map(DECODER.decode, whole):
                    last[line.cell_id] = line
            if rest:  # a last line without its newline: read, as the store reads it
                line = DECODER.decode(rest)
                last[line.cell_id] = line
    except FileNotFoundError:
        return []
    except REFUSED:
        return None
    return _rows(store.run_dir, list(last.values()))


def _rows(run_dir: Path, lines: list[ResultLine]) -> list[ResultRow]:
    """The lines as rows, each value they name in shared.jsonl put in place."""
    shared = {digest: value for digest, value, _ in read_shared(run_dir)}
    return [as_row(line, shared) for line in lines]


_FINGERPRINT = ResultRow._fields.index("fingerprint")
_HARDWARE = ResultRow._fields.index("hardware")  # the next one (layout.BY_REFERENCE)


def as_row(line: ResultLine, shared: Mapping[str, Any]) -> ResultRow:
    """``line`` as a row, the values it names put in place as ``RunStore.attempts`` puts
    them (``shared``: shared.jsonl's values by name; ``{}`` for a name it lacks)."""
    fields = msgspec.structs.astuple(line)
    fingerprint, hardware = fields[_FINGERPRINT], fields[_HARDWARE]
    if fingerprint.__class__ is str:
        fingerprint = shared.get(fingerprint, {})
    if hardware.__class__ is str:
        hardware = shared.get(hardware, {})
    return ResultRow._make((*fields[:_FINGERPRINT], fingerprint, hardware,
                            *fields[_HARDWARE + 1:]))

"""A record's result lines decoded by msgspec against the result's schema (a merge, a
report); where msgspec refuses a line, the caller reads it the way ``RunStore`` does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

import msgspec
from msgspec.structs import force_setattr

from harness.core.results import CellResult
from harness.records import codec
from harness.records.layout import RESULTS
from harness.records.store import RunStore, read_shared

DECODER = msgspec.json.Decoder(CellResult)
#: What ``DECODER`` raises for a line it does not take (RecursionError: nested deeper than
#: msgspec goes, where orjson still reads it).
REFUSED = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)
_CELL_ID = attrgetter("cell_id")


def result_rows(store: RunStore) -> list[CellResult] | None:
    """``store.results()`` (up to ``store.upto``), decoded by msgspec a block at a time; None
    where a line does not fit the schema (torn, blank, by hand), for the caller to read the
    record as ``RunStore`` does."""
    path = store.run_dir / RESULTS
    rows: list[CellResult] = []
    try:
        with open(path, "rb") as fh:
            rest, left = b"", store.upto
            while block := fh.read(codec.CHUNK if left is None else min(codec.CHUNK, left)):
                if left is not None:
                    left -= len(block)
                pieces = block.split(b"\n")
                pieces[0] = rest + pieces[0]  # the line the block before ended in
                rest = pieces.pop()
                rows += map(DECODER.decode, pieces)
            if rest:  # a last line without its newline: read, as the store reads it
                rows.append(DECODER.decode(rest))
    except FileNotFoundError:
        return []
    except REFUSED:
        return None
    ids = list(map(_CELL_ID, rows))
    if len(set(ids)) < len(ids):  # a cell retried: at its first place, its last attempt
        rows = list(dict(zip(ids, rows, strict=True)).values())
    in_place(rows, {digest: value for digest, value, _ in read_shared(store.run_dir)})
    return rows


def in_place(rows: Iterable[CellResult], shared: Mapping[str, Any]) -> None:
    """The shared values that lines just decoded name, put in place as ``RunStore.attempts``
    does (``{}`` for a name shared.jsonl lacks)."""
    for row in rows:
        if row.fingerprint.__class__ is str:
            force_setattr(row, "fingerprint", shared.get(row.fingerprint, {}))
        if row.hardware.__class__ is str:
            force_setattr(row, "hardware", shared.get(row.hardware, {}))

"""A record's result lines as msgspec reads them (``ResultRow``), for readers that need no
``CellResult`` of them: a merge passing a shard's lines through (``merge``), a report reading
each cell as a row. Where msgspec refuses a line, the caller reads it the way ``RunStore``
does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

import msgspec

from harness.core.results import ResultRow
from harness.records import codec
from harness.records.layout import RESULTS
from harness.records.store import RunStore, read_shared

DECODER = msgspec.json.Decoder(ResultRow)
#: What ``DECODER`` raises for a line it does not take (RecursionError: nested deeper than
#: msgspec goes, where orjson still reads it).
REFUSED = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)
_CELL_ID = attrgetter("cell_id")


def result_rows(store: RunStore) -> list[ResultRow] | None:
    """Each cell of ``store``'s record once, its last attempt at its first place, as
    ``as_rows(store.results())`` gives them (up to ``store.upto``), read straight into rows:
    or None where any line is not one result as the harness writes it (torn, blank, by
    hand), for the caller to read the record as ``RunStore`` does. A block at a time
    (``codec.CHUNK``), as the store reads it."""
    path = store.run_dir / RESULTS
    rows: list[ResultRow] = []
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


def in_place(rows: Iterable[ResultRow], shared: Mapping[str, Any]) -> None:
    """The values lines just decoded name put in place, in the rows themselves, as
    ``RunStore.attempts`` puts them (``shared``: shared.jsonl's values by name; ``{}`` for a
    name it lacks). A row with the values in place already is left as it is."""
    for row in rows:
        if row.fingerprint.__class__ is str:
            row.fingerprint = shared.get(row.fingerprint, {})
        if row.hardware.__class__ is str:
            row.hardware = shared.get(row.hardware, {})

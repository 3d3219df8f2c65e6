"""A run's cells as a report reads them, without decoding its record: the fields of each
cell's last attempt that the snapshot does not hold, as columns, in a file beside it.

A report reads every field of every cell (compat.json writes them all; JUnit, the site and
the downloads most). Decoding a fleet's record, 100,000 lines of 70 MB, into rows took
0.45-0.55 s in each of a report's two halves; the snapshot's columns and these make the same
rows in 0.2-0.3 s (``bench/report_rows.py``), most texts being a few distinct ones (the run
ids, nodes, reasons), each made once.

The file (``report_rows.json``) is a first line naming the record it was made from, as the
snapshot's does (``# results.jsonl <size> <mtime_ns> rows 1``), and one JSON document of
columns, each cell's place in the snapshot's order. A merge that makes its report writes it
(where every merged line is one ``lines.DECODER`` reads): 0.3 s of CPU, which a merge asked
for no report (``--no-report``) does not spend. A report takes it only when it and the
snapshot were both made from the record as the report found it, and it is whole: otherwise
the report reads the record, as it always did. ``results.jsonl`` stays the record.

Exactness: the columns are of the fields as ``lines.DECODER`` decoded them (``ResultRow``),
encoded and decoded by msgspec under the same types, so a row read here is the row
``lines.result_rows`` reads from the record, value for value and type for type (tested
against it). What comes from the snapshot (read by orjson) is texts alone: the keys, the
signature, the cell id, the outcome letter and the axis values, which a row holds as texts
(checked); every number is this file's (orjson reads an integer past 64 bits as a float).
A merge that writes a line ``DECODER`` refuses (a NaN, a plan's value that is no text), or
that read its record back after redacting a secret of its machine's, writes no file.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any

import msgspec

from harness.core import atomic
from harness.core.results import ResultRow
from harness.records import snapshot
from harness.records.snapshot import FROM_LETTER, Snapshot, Stamp
from harness.records.store import read_shared

FILE = "report_rows.json"
VERSION = 1

Code = Annotated[int, msgspec.Meta(ge=0)]


class _Texts(msgspec.Struct, forbid_unknown_fields=True):
    """A column of texts: each distinct one once (``table``), each cell its index in it."""

    table: list[str]
    codes: list[Code]


class _Values(msgspec.Struct, forbid_unknown_fields=True):
    """A column of JSON values, each distinct one once (``table``), each cell its index in
    it: ``details`` told apart by their JSON text (1, 1.0 and true stay three), a
    fingerprint or a machine by its name (one held inline: an entry of its own)."""

    table: list[Any]
    codes: list[Code]


class _Columns(msgspec.Struct, forbid_unknown_fields=True):
    """What the snapshot lacks of ``ResultRow``, typed as it types it."""

    cells: int
    run_id: _Texts
    env_key: _Texts
    backend: _Texts
    nodeid: _Texts
    reason: _Texts
    caveat: _Texts
    node: _Texts
    parent: _Texts
    log: list[str | None]
    # (the snapshot has it too, read by orjson: an integer past 64 bits there is a float)
    duration: list[int | float]
    finished_at: list[int | float]
    attempt: list[int]
    gpu: list[int | None]
    infra: list[bool]
    details: _Values
    fingerprint: _Values  # a name in shared.jsonl (or a value held inline)
    hardware: _Values


_TEXTS = ("run_id", "env_key", "backend", "nodeid", "reason", "caveat", "node", "parent")
_EACH = ("log", "duration", "finished_at", "attempt", "gpu", "infra")  # a value a cell
_BY_TABLE = ("details", "fingerprint", "hardware")  # (as _Values)
_NAMED = ("fingerprint", "hardware")
_ENCODE = msgspec.json.Encoder().encode
_DECODER = msgspec.json.Decoder(_Columns)


def encode(rows: Sequence[ResultRow]) -> bytes | None:
    """The document of ``rows``: a record's cells as ``lines.DECODER`` decoded its lines
    (their shared values by name, not yet in place), in the snapshot's order; None where a
    value will not be written (reports then read the record). A column at a time, in C."""

    def column(name: str) -> list[Any]:
        return list(map(attrgetter(name), rows))

    try:
        found: dict[str, Any] = {name: _Texts(*_tabled(column(name))) for name in _TEXTS}
        # (texts: ``ResultRow`` decodes them as str, never a subclass: equal is the same)
        found |= {name: column(name) for name in _EACH}
        for name in _NAMED:  # the names told apart as texts; a value held inline, alone
            values = column(name)
            keys = [v if v.__class__ is str else i for i, v in enumerate(values)]
            found[name] = _Values(*_tabled(values, keys))
        details = column("details")  # a few distinct mappings (a fleet's: ten)
        found["details"] = _Values(*_tabled(details, list(map(_ENCODE, details))))
        return msgspec.json.encode(_Columns(cells=len(rows), **found))
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError, RecursionError):
        return None


def _tabled(values: list[Any], keys: list[Any] | None = None) -> tuple[list[Any], list[int]]:
    """Each distinct value once, and each cell's index: told apart by ``keys`` (one a cell,
    distinct where the values are; default the values, which must be texts)."""
    order = list(dict.fromkeys(values if keys is None else keys))
    index = {key: i for i, key in enumerate(order)}
    if keys is None:
        return order, list(map(index.__getitem__, values))
    at = dict(zip(keys, range(len(keys)), strict=True))  # a cell of each (equal values)
    table = [values[at[key]] for key in order]
    return table, list(map(index.__getitem__, keys))


def write(run_dir: Path, document: bytes, made_from: Stamp) -> bool:
    """The file, made from the record as ``made_from`` found it (False: the folder does not
    take it; reports then read the record)."""
    try:
        atomic.write_bytes(run_dir / FILE, snapshot.head(made_from, "rows", VERSION) + document)
    except OSError:
        return False
    return True


def read(run_dir: Path, made_from: Stamp, current: Snapshot | None = None
         ) -> list[ResultRow] | None:
    """The run's cells as ``lines.result_rows`` reads them from the record as ``made_from``
    found it (each cell's last attempt at its first place, its shared values in place),
    made from the snapshot and this file; None where either is missing, made from another
    state of the record, or not whole. ``current``: the snapshot, where the caller has
    read it since ``made_from`` was taken (``snapshot.read``). The rows share their
    mappings (a table's entries): read them, never change them."""
    if snapshot.stamp(run_dir) != made_from:
        return None  # the record has moved on since the report looked: read it as it was
    rest = _load(run_dir, made_from)
    found = current if current is not None else snapshot.read(run_dir)
    if rest is None or found is None or not _whole(rest, len(found)) or not all(
            set(map(type, axes.values())) <= {str} for axes in found.table("values")):
        return None  # (a row's axis values are texts: a snapshot of others is no row's)
    _in_place(run_dir, rest)
    try:
        columns = {name: _column(getattr(rest, name)) for name in (*_TEXTS, *_BY_TABLE)}
    except IndexError:  # a code past its table
        return None
    columns |= {name: getattr(rest, name) for name in _EACH}
    columns |= {"cell_id": found.cell_ids,
                "outcome": list(map(FROM_LETTER.__getitem__, found.letters))}
    for name in ("environment", "values", "case_id", "variant", "hardware_target",
                 "signature"):
        columns[name] = list(map(found.table(name).__getitem__, found.codes(name)))
    if snapshot.stamp(run_dir) != made_from:  # (changed while read: made of two states)
        return None
    return list(map(ResultRow, *(columns[name] for name in ResultRow.__struct_fields__)))


def _load(run_dir: Path, made_from: Stamp) -> _Columns | None:
    """The file's columns, if it was made from the record as ``made_from`` found it and
    holds them as ``_Columns`` types them."""
    try:
        with open(run_dir / FILE, "rb") as fh:
            if fh.readline() != snapshot.head(made_from, "rows", VERSION):
                return None
            return _DECODER.decode(fh.read())
    except (OSError, msgspec.DecodeError, RecursionError):
        return None


def _in_place(run_dir: Path, rest: _Columns) -> None:
    """The fingerprints' and machines' names put in place, once each, in their tables (as
    ``lines.in_place`` does a row at a time: {} for a name shared.jsonl lacks)."""
    tables = [getattr(rest, name).table for name in _NAMED]
    if any(v.__class__ is str for table in tables for v in table):
        shared = {digest: value for digest, value, _ in read_shared(run_dir)}
        for table in tables:
            table[:] = [shared.get(v, {}) if v.__class__ is str else v for v in table]


def _column(values: _Texts | _Values) -> list[Any]:
    return list(map(values.table.__getitem__, values.codes))


def _whole(rest: _Columns, cells: int) -> bool:
    """Every column of the snapshot's length."""
    return rest.cells == cells and all(
        len(getattr(rest, name).codes) == cells for name in (*_TEXTS, *_BY_TABLE)) and all(
        len(getattr(rest, name)) == cells for name in _EACH)

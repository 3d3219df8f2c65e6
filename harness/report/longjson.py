"""compat.json: the long table as JSON, each cell once, what many cells share written once.

``results`` is a table in pandas' "split" layout: ``columns`` (a result's fields, in the
record's order, ``fingerprint`` and ``hardware`` last) and ``data`` (a row of values per
cell), so ``pandas.DataFrame(**data["results"])`` reads it. The field names are written once,
not once per cell (in a suite of thousands of tests they were half the file). An
environment's fingerprint and a machine are written once too (``fingerprints`` by environment
key, ``machines`` by node, ``node#gpu`` for a cell given one GPU): a cell's ``fingerprint``
or ``hardware`` is null where it is its key's (or empty and its key has none), so nothing
is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec.structs import astuple

from harness.core import jsonio
from harness.core.results import CellResult

__all__ = ["COLUMNS", "write_long_json"]

#: The columns of ``results``: a ``CellResult``'s fields, in order.
COLUMNS = CellResult.__struct_fields__


def write_long_json(path: Path, head: dict[str, Any], results: Sequence[CellResult],
                    tail: dict[str, Any]) -> None:
    """``head``, then ``fingerprints``, ``machines``, ``results`` (``columns`` and ``data``),
    then ``tail``. Compact, the rows a few thousand at a time: a fleet's file is tens of MB,
    never one string."""
    fingerprints: dict[str, Any] = {}
    firsts: dict[tuple[str, int | None], Any] = {}  # (node, gpu) -> its first cell's
    for r in results:  # each key's value: its first cell's
        if r.fingerprint:
            fingerprints.setdefault(r.env_key, r.fingerprint)
        if r.hardware:
            firsts.setdefault((r.node, r.gpu), r.hardware)
    machines: dict[str, Any] = {}
    for (node, gpu), hardware in firsts.items():  # in order of their first cells
        machines.setdefault(_machine(node, gpu), hardware)

    def row(r: CellResult) -> tuple[Any, ...]:
        fingerprint = r.fingerprint if _own(r.fingerprint, fingerprints.get(r.env_key)) else None
        # by its key, as a reader finds it (node "a#1" and node "a" on GPU 1 are one key)
        hardware = r.hardware if _own(r.hardware, machines.get(_machine(r.node, r.gpu))) else None
        return (*astuple(r)[:-2], fingerprint, hardware)

    def encode(chunk: list[CellResult]) -> bytes:
        return jsonio.dumps(list(map(row, chunk)))

    with open(path, "wb") as fh:
        fh.write(jsonio.dumps({**head, "fingerprints": fingerprints, "machines": machines})[:-1]
                 + b',"results":{"columns":' + jsonio.dumps(COLUMNS) + b',"data":')
        jsonio.write_array(fh, results, encode)
        fh.write(b"}" + (b"," + jsonio.dumps(tail)[1:] if tail else b"}"))


def _own(value: Any, known: Any) -> bool:
    """Whether a cell writes ``value`` of its own: it is not its key's (``known``; none:
    empty), an empty one included (a reader takes a null for the key's)."""
    return known is not value and value != ({} if known is None else known)


def _machine(node: str, gpu: int | None) -> str:
    """A cell's key in compat.json's ``machines``."""
    return node if gpu is None else f"{node}#{gpu}"

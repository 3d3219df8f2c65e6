"""compat.json: the long table as JSON, each cell once, without what cells share.

The results array is most of a fleet's file (100,000 rows of two dozen fields, 60 MB).
Made as dicts (``msgspec.structs.asdict``, what a cell shares popped, then ``jsonio``) it was
a fifth of the report's data half. Rows read straight from the record (every value as JSON
decoded it) are written by msgspec from the rows themselves, a shared fingerprint or
machine left out as ``UNSET`` while it writes (``ResultRow`` holds those two last, where the
dicts put a cell's own). The bytes are the dicts': msgspec writes texts, mappings and
numbers below 1e16 as orjson does (checked over every code point and millions of floats);
past that it writes ``1e16`` where orjson writes ``1e+16``, and an integer past 64 bits
where ``jsonio`` falls back to ``json``. So a block whose numbers reach 1e16, or whose
``details`` (or a cell's own fingerprint or machine: anything a record holds) msgspec and
orjson do not write alike, is written as dicts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import orjson
from msgspec.structs import asdict

from harness.core import jsonio
from harness.core.results import ResultRow

__all__ = ["write_long_json"]

_ENCODER = msgspec.json.Encoder()
#: msgspec's refusals (a value JSON cannot hold): such a block is written as dicts.
_NOT_ENCODED = (msgspec.EncodeError, TypeError, ValueError, OverflowError)


def write_long_json(path: Path, head: dict[str, Any], results: Sequence[ResultRow],
                    tail: dict[str, Any], *, decoded: bool = False) -> None:
    """``head``, then ``fingerprints`` (by environment key), ``machines`` (by node,
    ``node#gpu`` for a cell given one GPU), ``results`` (each cell once, without what it
    shares: a cell whose fingerprint or machine differs from its key's keeps its own, so
    nothing is dropped), then ``tail``. Compact, the results a few thousand at a time: a
    fleet's file is 100 MB, never one string. ``decoded``: every value in the rows is as a
    JSON decoder made it (the record's lines read straight into rows), so msgspec may write
    them."""
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
    known_machine = {pair: machines[_machine(*pair)] for pair in firsts}

    def own(r: ResultRow) -> dict[str, Any]:  # the fields a cell does not share
        return {field: value for field, value, known in (
            ("fingerprint", r.fingerprint, fingerprints.get(r.env_key)),
            ("hardware", r.hardware, known_machine.get((r.node, r.gpu))))
            if _own(value, known)}

    def as_dict(r: ResultRow) -> dict[str, Any]:
        data = asdict(r)
        data["outcome"] = str(r.outcome)
        del data["fingerprint"], data["hardware"]
        return {**data, **own(r)}  # a cell's own values last

    # What a cell writes of a value it may share, by its key and the value's id: the value
    # (its own: unlike its key's) or UNSET (msgspec leaves the field out). Asked once per
    # key and value: cells of an environment on one kind of runner share one object.
    written_fp = _Written(fingerprints)
    written_hw = _Written(known_machine)

    def encode(chunk: list[ResultRow]) -> bytes:
        if not decoded or not _alike(chunk):
            return jsonio.dumps(list(map(as_dict, chunk)))
        fps, hws = list(map(_FINGERPRINT, chunk)), list(map(_HARDWARE, chunk))
        written_fp.by_id.update(zip(map(id, fps), fps, strict=True))
        written_hw.by_id.update(zip(map(id, hws), hws, strict=True))
        text = None
        try:
            # The row's fields in order, its own fingerprint and machine last, as the dicts
            # have them (``ResultRow`` holds them last).
            _set(chunk, "fingerprint", map(written_fp.__getitem__, zip(
                map(_ENV_KEY, chunk), map(id, fps), strict=True)))
            _set(chunk, "hardware", map(written_hw.__getitem__, zip(
                zip(map(_NODE, chunk), map(_GPU, chunk), strict=True), map(id, hws),
                strict=True)))
            if written_fp.alike and written_hw.alike:
                text = _ENCODER.encode(chunk)
        except _NOT_ENCODED:
            pass
        finally:
            _set(chunk, "fingerprint", fps)
            _set(chunk, "hardware", hws)
        return jsonio.dumps(list(map(as_dict, chunk))) if text is None else text

    with open(path, "wb") as fh:
        fh.write(jsonio.dumps({**head, "fingerprints": fingerprints, "machines": machines})[:-1]
                 + b',"results":')
        jsonio.write_array(fh, results, encode)
        fh.write(b"," + jsonio.dumps(tail)[1:])


class _Written(dict[tuple[Any, int], Any]):
    """(a cell's key, its value's id) -> what the cell writes: UNSET where the value is its
    key's (or empty), else the value. ``by_id``: id -> value (held, so an id stays its
    value's while the file is written)."""

    def __init__(self, known: dict[Any, Any]) -> None:
        super().__init__()
        self.known, self.by_id = known, dict[int, Any]()
        self.alike = True  # msgspec writes each value a cell keeps of its own as orjson

    def __missing__(self, key: tuple[Any, int]) -> Any:
        value = self.by_id[key[1]]
        if _own(value, self.known.get(key[0])):
            self.alike = self.alike and _written_alike(value, depth=2)
        else:
            value = msgspec.UNSET
        self[key] = value
        return value


def _own(value: Any, known: Any) -> bool:
    """Whether a cell keeps ``value`` of its own: it has one, unlike its key's (``known``)."""
    return bool(value) and known is not value and known != value


def _set(rows: list[ResultRow], field: str, values: Iterable[Any]) -> None:
    """Each row's ``field`` to its value (in C)."""
    deque(map(setattr, rows, repeat(field), values), maxlen=0)


def _alike(chunk: Sequence[ResultRow]) -> bool:
    """Whether msgspec writes ``chunk``'s cells as ``jsonio`` writes their dicts (but for a
    value a cell keeps of its own, asked apart): no number as large as 1e16 (the other
    fields are texts, or None), and ``details``, which may hold anything, written alike."""
    numbers = chain(map(_DURATION, chunk), map(_FINISHED_AT, chunk), map(_ATTEMPT, chunk),
                    filter(None, map(_GPU, chunk)))
    return (max(map(abs, numbers), default=0) < 1e16
            and _written_alike(list(map(_DETAILS, chunk)), depth=1))


def _written_alike(value: Any, depth: int) -> bool:
    """Whether msgspec and ``jsonio`` write ``value`` alike, at ``depth`` more levels of
    nesting (where it sits in a block: orjson refuses past 254 levels, and ``jsonio`` then
    writes the block through ``json``, which writes other bytes; msgspec goes deeper)."""
    for _ in range(depth):
        value = [value]
    try:
        return bool(_ENCODER.encode(value) == orjson.dumps(value))
    except (*_NOT_ENCODED, orjson.JSONEncodeError):
        return False


def _machine(node: str, gpu: int | None) -> str:
    """A cell's key in compat.json's ``machines``."""
    return node if gpu is None else f"{node}#{gpu}"


_FINGERPRINT, _HARDWARE = attrgetter("fingerprint"), attrgetter("hardware")
_DURATION, _FINISHED_AT = attrgetter("duration"), attrgetter("finished_at")
_ATTEMPT = attrgetter("attempt")
_DETAILS = attrgetter("details")
_ENV_KEY, _NODE, _GPU = attrgetter("env_key"), attrgetter("node"), attrgetter("gpu")

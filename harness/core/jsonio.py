"""JSON written for what grows with the matrix: run records, plans, compat.json, the site's data.

Through orjson, several times faster than the standard library's. What orjson refuses goes
through the standard library, so any value json wrote before is still written and read as json
reads it: a lone surrogate in a string, an integer past 64 bits, a key that is not a string,
NaN. Output is compact and UTF-8 (not ``\\uXXXX`` escapes); the small files people read
(run.json, cases.json) stay indented through ``json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import orjson


def dumps(value: Any, default: Callable[[Any], Any] = str) -> bytes:
    """Compact JSON bytes; what orjson cannot represent, as the standard library writes it."""
    try:
        return orjson.dumps(value, default=default)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, default=default, separators=(",", ":")).encode()


def write_array(fh: IO[bytes], items: Sequence[Any],
                encode: Callable[[list[Any]], bytes] = dumps, step: int = 5000) -> None:
    """``items`` as one JSON array into ``fh``, a few thousand at a time through ``encode``
    (a list to its array's bytes): a large array is never one text and its copies."""
    fh.write(b"[")
    for start in range(0, len(items), step):
        fh.write((b"," if start else b"") + encode(list(items[start:start + step]))[1:-1])
    fh.write(b"]")


#: Digits as "0", anything else as "x": a run of 19 zeros in a text so translated may be a
#: number orjson reads as a float (an integer past 64 bits; below -2**63 that takes only 19
#: digits), or 19 digits in a string. A translate and a find: faster than a regular expression.
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x78 for i in range(256))
_LONG_NUMBER = b"0" * 19


def plain_numbers(text: bytes) -> bool:
    """Whether ``text`` holds no run of 19 digits: then orjson reads every number in it as
    json does (an integer past 64 bits, or below -2**63, it may read as a float)."""
    return text.translate(_DIGITS).find(_LONG_NUMBER) < 0


def loads(text: bytes) -> Any:
    """``text``'s value as ``json.loads`` reads it: through orjson where orjson reads the same
    (no run of 19 digits, a number it may read as a float; nothing it refuses, such as
    NaN or a lone surrogate), else through json. Raises ValueError as json does."""
    if plain_numbers(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def loads_lines(data: bytes) -> Iterator[tuple[bytes, Any, bool]]:
    """Each line of a JSON-lines text with its value as ``json.loads`` reads it, mostly
    through orjson, and whether ``dumps`` of the value
    gives the line back as data (so that the line may stand for it as it is): not where
    orjson refuses what json reads and ``dumps`` would not write back (NaN, an infinity, a
    lone surrogate) or would read a long integer as a float; those go through json. A line
    neither reads (blank, torn) is left out."""
    fast = plain_numbers(data)  # once for the text, not a line
    for line in data.split(b"\n"):
        if fast:
            try:
                yield line, orjson.loads(line), True
                continue
            except orjson.JSONDecodeError:
                pass
        try:
            yield line, json.loads(line), False
        except ValueError:
            continue

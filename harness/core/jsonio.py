"""JSON for what grows with the matrix, through orjson; what orjson refuses or reads otherwise
(NaN, a lone surrogate, an integer past 64 bits) goes through ``json``, so values read as before."""

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
    """``items`` as one JSON array into ``fh``, ``step`` at a time through ``encode``."""
    fh.write(b"[")
    for start in range(0, len(items), step):
        fh.write((b"," if start else b"") + encode(list(items[start:start + step]))[1:-1])
    fh.write(b"]")


#: Digits as "0", anything else as "x": 19 zeros in a translated text may be an integer
#: orjson reads as a float (past 64 bits).
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x78 for i in range(256))
_LONG_NUMBER = b"0" * 19


def plain_numbers(text: bytes) -> bool:
    """Whether ``text`` holds no run of 19 digits: then orjson reads its numbers as json does."""
    return text.translate(_DIGITS).find(_LONG_NUMBER) < 0


def loads(text: bytes) -> Any:
    """``text``'s value as ``json.loads`` reads it (orjson where it reads the same)."""
    if plain_numbers(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def loads_lines(data: bytes) -> Iterator[tuple[bytes, Any, bool]]:
    """Each line of a JSON-lines text, its value, and whether ``dumps`` of the value gives the
    line back (read by orjson, not json); a line neither reads (blank, torn) is left out."""
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

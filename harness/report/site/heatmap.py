"""heatmap.png: one square per cell, coloured by outcome, written without a plotting library."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from harness.core.results import Outcome

COLOURS = {
    Outcome.PASS: (46, 160, 67), Outcome.REPRODUCED: (230, 140, 20), Outcome.FAIL: (215, 40, 40),
    Outcome.SKIP: (190, 196, 204), Outcome.ERROR: (170, 50, 160), Outcome.TIMEOUT: (240, 110, 30),
    Outcome.CRASH: (140, 0, 0), Outcome.NOT_RUN: (244, 245, 247), Outcome.MISSING: (110, 90, 200),
    Outcome.FLAKY: (235, 200, 40),
}
EMPTY = (255, 255, 255)


def write_png(path: Path, rows: Sequence[Sequence[Outcome | None]], *, scale: int = 4) -> int:
    """Write the grid (rows of outcomes; None: no such cell) and return its width in pixels."""
    width = max((len(r) for r in rows), default=1) or 1
    height = max(len(rows), 1)
    pixels: dict[Outcome | None, bytes] = {o: bytes(c) * scale for o, c in COLOURS.items()}
    pixels[None] = bytes(EMPTY) * scale
    raw = bytearray()
    for row in rows or [[]]:
        line = b"".join(map(pixels.__getitem__, row[:width])) + pixels[None] * (width - len(row))
        raw += (b"\x00" + line) * scale  # filter type 0 per scanline
    w, h = width * scale, height * scale

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))
    path.write_bytes(png)
    return w

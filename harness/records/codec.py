"""The JSON-lines codec of run records: appended whole and fsynced (at once, or in batches),
read a MiB at a time."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.core import jsonio

_IOV_MAX = 1024  # pieces a writev takes (Linux's UIO_MAXIOV)


def append(path: Path, data: bytes | Sequence[bytes], *, sync: bool = True) -> None:
    """Append on an O_APPEND descriptor, then one fsync (unless ``sync`` is False): a kill at
    any point leaves whole lines and at most a torn tail, which reading skips. ``data`` in
    pieces (a merge's lines, as the shards wrote them) is written as they are, not joined."""
    fd = _opened(path)
    try:
        _write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _opened(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def _write(fd: int, data: bytes | Sequence[bytes]) -> None:
    pieces = [data] if isinstance(data, bytes) else data
    for start in range(0, len(pieces), _IOV_MAX):
        batch = pieces[start:start + _IOV_MAX]
        done = os.writev(fd, batch)
        if done < sum(map(len, batch)):  # a large write may be partial
            view = memoryview(b"".join(batch))[done:]
            while view:
                view = view[os.write(fd, view):]


SYNC_LINES = 500  # lines appended between two fsyncs of a batched file, at most
SYNC_SECONDS = 1.0  # and seconds since the first of them


class Batched:
    """Appends to one file, on one descriptor kept open, each write at once (a kill -9 of
    this process loses none of it: the kernel holds it), and fsyncs (what only a crash of the
    machine could lose) once per SYNC_LINES lines, at a write SYNC_SECONDS after the first
    unsynced one, and on ``sync``: a suite's thousands of tests are not an fsync each."""

    def __init__(self, path: Path, lines: int = SYNC_LINES,
                 seconds: float = SYNC_SECONDS) -> None:
        self.path, self.lines, self.seconds = path, lines, seconds
        self.fd: int | None = None  # open from the first append to ``sync``
        self.pending = 0  # lines written since the last fsync
        self.since = 0.0  # when the first of them was written (monotonic)

    def append(self, data: bytes | Sequence[bytes]) -> None:
        if self.fd is None:
            self.fd = _opened(self.path)
        if not self.pending:
            self.since = time.monotonic()
        pieces = [data] if isinstance(data, bytes) else data
        self.pending += sum(piece.count(b"\n") for piece in pieces)
        _write(self.fd, pieces)
        if self.pending >= self.lines or time.monotonic() - self.since >= self.seconds:
            os.fsync(self.fd)
            self.pending = 0

    def sync(self) -> None:
        """What was written, on the disk, and the file closed (at the end of a run, or when
        it is stopped; a later append opens it again)."""
        if self.fd is not None:
            if self.pending:
                os.fsync(self.fd)
                self.pending = 0
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


#: How much of a record is read and decoded at once: a large record whole is several copies
#: of it in memory; small blocks stay below glibc's mmap threshold (not pinned in the heap).
CHUNK = 1 << 20


def read_lines(path: Path, size: int | None = None) -> list[Any]:
    """The values of a JSON-lines file (``read_record``'s)."""
    return read_record(path, size)[0]


def read_record(path: Path, size: int | None = None) -> tuple[list[Any], bool]:
    """The values of a JSON-lines file, decoded a MiB of whole lines at a time, line by line
    only where that fails (a torn or blank line skipped), and whether every line but a blank
    one was read. ``size``: its first bytes alone (what it held then)."""
    data: list[Any] = []
    whole = True
    rest = b""
    left = size
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK if left is None else min(CHUNK, left)):
            if left is not None:
                left -= len(block)
            block = rest + block
            cut = block.rfind(b"\n") + 1  # whole lines now, the rest with the next block
            whole &= _decode_chunk(block[:cut], data)
            rest = block[cut:]
    whole &= _decode_chunk(rest, data)
    return data, whole


def _decode_chunk(chunk: bytes, data: list[Any]) -> bool:
    """The chunk's values onto ``data``; whether each line but a blank one was decoded."""
    body = chunk.strip().replace(b"\n", b",")
    try:
        values = jsonio.loads(b"[" + body + b"]") if body else []
    except ValueError:
        whole = True
        for line in chunk.splitlines():
            try:
                data.append(json.loads(line))
            except ValueError:
                whole &= not line.strip()
        return whole
    if isinstance(values, list):
        data += values
        return True
    return False

"""Run records' JSON lines: appended whole and fsynced (at once, or in batches), read line by
line."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path


def append(path: Path, data: bytes) -> None:
    """Append on an O_APPEND descriptor, then one fsync: a kill at any point leaves whole lines
    and at most a torn tail, which reading skips."""
    fd = _opened(path)
    try:
        _write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _opened(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a large write may be partial
        view = view[os.write(fd, view):]


SYNC_LINES = 500  # lines appended between two fsyncs of a batched file, at most
SYNC_SECONDS = 1.0  # and seconds since the first of them


class Batched:
    """Appends to one file on a descriptor kept open, each write at once (a kill -9 loses
    none: the kernel holds it), fsynced every SYNC_LINES lines or SYNC_SECONDS, and on ``sync``."""

    def __init__(self, path: Path, lines: int = SYNC_LINES,
                 seconds: float = SYNC_SECONDS) -> None:
        self.path, self.lines, self.seconds = path, lines, seconds
        self.fd: int | None = None  # open from the first append to ``sync``
        self.pending = 0  # lines written since the last fsync
        self.since = 0.0  # when the first of them was written (monotonic)

    def append(self, data: bytes) -> None:
        if self.fd is None:
            self.fd = _opened(self.path)
        if not self.pending:
            self.since = time.monotonic()
        self.pending += data.count(b"\n")
        _write(self.fd, data)
        if self.pending >= self.lines or time.monotonic() - self.since >= self.seconds:
            os.fsync(self.fd)
            self.pending = 0

    def sync(self) -> None:
        """What was written, on the disk, and the file closed (a later append opens it again)."""
        if self.fd is not None:
            if self.pending:
                os.fsync(self.fd)
                self.pending = 0
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def lines(path: Path, size: int | None = None) -> Iterator[bytes]:
    """The lines of a file, each with its newline (a torn last one without); ``size``: its
    first bytes alone."""
    left = size
    with open(path, "rb") as fh:
        for line in fh:
            if left is not None:
                if left <= 0:
                    return
                line = line[:left]
                left -= len(line)
            yield line

"""Writes a reader never sees half of: written beside the target (``.<name>.tmp<pid>.<thread>``)
and renamed over it."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def temporary(path: Path) -> Path:
    """Where a new ``path`` is written before it replaces the old one."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")


@contextlib.contextmanager
def replacing(path: Path, *, text: bool = False) -> Iterator[IO[Any]]:
    """A file for ``path``'s new content: it replaces ``path`` when the block ends."""
    tmp = temporary(path)
    try:
        with open(tmp, "w" if text else "wb", encoding="utf-8" if text else None) as fh:
            yield fh
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> None:
    with replacing(path) as fh:
        fh.write(data)


def write_text(path: Path, text: str) -> None:
    with replacing(path, text=True) as fh:
        fh.write(text)


def point_link(link: Path, target: str) -> None:
    """``link`` -> ``target`` (a symlink), replacing whatever ``link`` was in one step."""
    tmp = temporary(link)
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    try:
        tmp.replace(link)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

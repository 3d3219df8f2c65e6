"""Words a count is said with."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``1 cell``, ``0 cells``, ``2 cells``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"

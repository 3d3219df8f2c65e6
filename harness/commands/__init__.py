"""The CLI's command bodies: arguments to the pipeline, then print. Each is imported only when
its command runs (``harness.cli.COMMANDS``), so ``harness --help`` imports no pipeline module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from harness.core.errors import UsageError


@contextlib.contextmanager
def naming(option: str, path: Path) -> Iterator[None]:
    """An OSError on a path the user gave (a file where a folder goes, /proc, a name too long)
    as one line naming the option."""
    try:
        yield
    except FileExistsError as exc:  # a folder made where a file is
        raise UsageError(f"{option} {path}: {exc.filename} is a file, not a folder") from None
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from None

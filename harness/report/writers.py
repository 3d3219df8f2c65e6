"""The report's formats by name: a format is a module with a ``write`` (the report's data and
the folder in, the paths it wrote out) and a line in ``WRITERS``, or ``register`` at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.report import csvfile, junit, longjson, pages
from harness.report.data import Report

Write = Callable[[Report, Path], dict[str, Path]]

WRITERS: dict[str, Write] = {"junit": junit.write, "csv": csvfile.write,
                             "json": longjson.write, "site": pages.write}


def register(name: str, write: Write) -> None:
    """One more format, written with the others from then on (a name taken is replaced)."""
    WRITERS[name] = write


def write_all(report: Report, out_dir: Path) -> dict[str, Path]:
    """Every registered format into ``out_dir``, in turn: the paths written, by name."""
    return {key: path for write in WRITERS.values()
            for key, path in write(report, out_dir).items()}

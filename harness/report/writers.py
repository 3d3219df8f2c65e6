"""The report's formats by name: a new one is a module with a writer (the report's data and
the folder in, the paths it wrote out) and a line in ``WRITERS``, or ``register`` at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.report import formats
from harness.report.data import Report


@dataclass(frozen=True)
class Writer:
    write: Callable[[Report, Path], dict[str, Path]]


WRITERS: dict[str, Writer] = {
    "junit": Writer(formats.junit), "csv": Writer(formats.csv),
    "json": Writer(formats.long_json), "site": Writer(formats.site)}


def register(name: str, write: Callable[[Report, Path], dict[str, Path]]) -> None:
    """One more format, written with the others from then on (a name taken is replaced)."""
    WRITERS[name] = Writer(write)


def write_all(report: Report, out_dir: Path, also: Callable[[], None] = lambda: None
              ) -> dict[str, Path]:
    """Every registered format into ``out_dir``, one after the other, then ``also``. The
    paths written, by name."""
    paths: dict[str, Path] = {}
    for writer in WRITERS.values():
        paths.update(writer.write(report, out_dir))
    also()
    return paths

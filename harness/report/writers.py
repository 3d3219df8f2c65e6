"""The report's formats by name: a new one is a module with a writer (the report's data and
the folder in, the paths it wrote out) and a line in ``WRITERS``, or ``register`` at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.core.bulk import side_by_side
from harness.report import formats
from harness.report.data import Report


@dataclass(frozen=True)
class Writer:
    write: Callable[[Report, Path], dict[str, Path]]
    # In a process of its own, beside the others (the site: about half of a report's time).
    apart: bool = False


WRITERS: dict[str, Writer] = {
    "junit": Writer(formats.junit), "csv": Writer(formats.csv),
    "json": Writer(formats.long_json), "site": Writer(formats.site, apart=True)}


def register(name: str, write: Callable[[Report, Path], dict[str, Path]], *,
             apart: bool = False) -> None:
    """One more format, written with the others from then on (a name taken is replaced)."""
    WRITERS[name] = Writer(write, apart)


def write_all(report: Report, out_dir: Path, also: Callable[[], None] = lambda: None
              ) -> dict[str, Path]:
    """Every registered format into ``out_dir``: those ``apart`` in a process of their own
    and the rest in another, at once (on one core, one after the other); ``also`` beside the
    rest. The paths written, by name."""
    here = {n: w for n, w in WRITERS.items() if not w.apart}
    apart = {n: w for n, w in WRITERS.items() if w.apart}
    paths: dict[str, Path] = {}

    def aside() -> None:
        paths.update(side_by_side(lambda: _each(apart.values(), report, out_dir), lambda: None,
                                  f"writing the report's {', '.join(apart)}"))

    def rest() -> dict[str, Path]:
        written = _each(here.values(), report, out_dir)
        also()
        return written

    paths.update(side_by_side(rest, aside, f"writing the report's {', '.join(here)}"))
    return paths


def _each(writers: Iterable[Writer], report: Report, out_dir: Path) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    for writer in writers:
        paths.update(writer.write(report, out_dir))
    return paths

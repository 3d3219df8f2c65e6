"""The report's formats by name: a format is a module with a ``write`` (the report's data and
the folder in, the paths it wrote out) and a line in ``WRITERS``, or ``register`` at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from harness.report import csvfile, junit, longjson, pages
from harness.report.data import Report

Write = Callable[[Report, Path], dict[str, Path]]

WRITERS: dict[str, Write] = {"junit": junit.write, "csv": csvfile.write,
                             "json": longjson.write, "site": pages.write}
#: The format written in this process while a worker process writes the others.
HERE = "site"


def register(name: str, write: Write) -> None:
    """One more format, written with the others from then on (a name taken is replaced)."""
    WRITERS[name] = write


def write_all(report: Report, out_dir: Path) -> dict[str, Path]:
    """Every registered format into ``out_dir``: the paths written, by name.
    The worker is forked, so it is given the report as it is here, not a pickled copy."""
    with ProcessPoolExecutor(1, mp_context=get_context("fork"), initializer=_given.extend,
                             initargs=((report, out_dir),)) as pool:
        there = {name: pool.submit(_write, name) for name in WRITERS if name != HERE}
        written = {HERE: WRITERS[HERE](report, out_dir)} if HERE in WRITERS else {}
        written.update((name, future.result()) for name, future in there.items())
    return {key: path for name in WRITERS for key, path in written[name].items()}


_given: list[Any] = []  # in the worker: the report and its folder


def _write(name: str) -> dict[str, Path]:
    return WRITERS[name](*_given)

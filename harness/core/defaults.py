"""Defaults that more than one stage, or the command line and a stage, must agree on."""

from __future__ import annotations

import os

#: Times a cell is run again when its machine fails (``--retries``).
RETRIES = 2
#: What ``--fail-on`` may say makes the exit code 1, and what it says when not given.
FAIL_ON = ("new", "changed", "any")
DEFAULT_FAIL_ON = "new"
#: The most cells a matrix may expand to (``--max-cells``, ``HARNESS_MAX_CELLS``).
MAX_CELLS = 100_000


def cell_limit(given: int | None = None) -> int:
    """``--max-cells`` if given, else ``HARNESS_MAX_CELLS``, else ``MAX_CELLS``."""
    if given is not None:
        return given
    raw = os.environ.get("HARNESS_MAX_CELLS", "")
    if raw and not (raw.isdigit() and int(raw) > 0):  # a UsageError where the matrix is read
        raise ValueError(f"HARNESS_MAX_CELLS={raw!r}: expected a number of cells, 1 or more")
    return int(raw) if raw else MAX_CELLS

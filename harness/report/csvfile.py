"""compat.csv: the long table (``Report.columns``), a line per cell, as ``csv.writer`` writes it."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.report.data import Report


def write_csv(path: Path, columns: Mapping[str, Sequence[Any]]) -> None:
    """The header (the columns' names), then a line per row of ``columns`` (of one length)."""
    with open(path, "w", encoding="utf-8", newline="") as fh:
        # With csv's own line end ("\r\n") a field holding a lone CR is quoted too; each row
        # is written ending in "\n".
        writer = csv.writer(SimpleNamespace(write=lambda row: fh.write(row[:-2] + "\n")))
        writer.writerow(columns)
        writer.writerows(zip(*columns.values(), strict=True))


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """The report's compat.csv."""
    write_csv(out_dir / "compat.csv", report.columns)
    return {"csv": out_dir / "compat.csv"}

"""Progress with counts per outcome: a live bar on a terminal, one line per cell elsewhere."""

from __future__ import annotations

import sys
from collections import Counter
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from harness.core.results import CellResult


class RunProgress:
    def __init__(self, total: int, *, live: bool | None = None) -> None:
        self.total = total
        self.counts: Counter[str] = Counter()
        self.live = sys.stderr.isatty() if live is None else live
        self.console = Console(stderr=True, highlight=False)
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def __enter__(self) -> RunProgress:
        if self.live:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=self.console)
            self.bar.__enter__()
            self.task = self.bar.add_task("running", total=self.total)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.bar is not None:
            self.bar.__exit__(et, ev, tb)

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, soft_wrap=True)

    def advance(self, result: CellResult) -> None:
        self.counts[str(result.outcome)] += 1
        summary = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, advance=1, description=summary)
        else:
            done = sum(self.counts.values())
            reason = f"  {result.reason.splitlines()[0][:100]}" if result.reason else ""
            self.console.print(f"[{done}/{self.total}] {result.outcome:<10} {result.environment}"
                               f" {result.case_id}::{result.variant} @{result.hardware_target}"
                               f"{reason}", markup=False, soft_wrap=True)

"""Progress with counts per outcome: a live bar on a terminal, one line per cell elsewhere.

Cells that were never run (NOT_RUN: no GPU of their kind here) say one line per environment,
hardware target and reason, with their count: a CPU machine's run of the default matrix
printed 1,873 lines that said the same. ``verbose`` prints every cell; the record and the
report keep every cell either way."""

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

from harness.core.results import CellResult, Outcome


class RunProgress:
    def __init__(self, total: int, *, live: bool | None = None, verbose: bool = False
                 ) -> None:
        self.total = total
        self.verbose = verbose
        self.counts: Counter[str] = Counter()
        # (environment, hardware, reason) -> how many NOT_RUN cells wait to be said in one line
        self.held: dict[tuple[str, str, str], int] = {}
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
        self.flush()
        if self.bar is not None:
            self.bar.__exit__(et, ev, tb)

    def note(self, message: str) -> None:
        self.flush()
        self.console.print(message, markup=False, soft_wrap=True)

    def flush(self) -> None:
        """Say the NOT_RUN cells held so far, a line per environment × hardware × reason."""
        held, self.held = self.held, {}
        for (environment, hardware, reason), count in held.items():
            cells = f"{count} cells" if count > 1 else "1 cell"
            self.console.print(f"{'not run':<10} {environment} @{hardware} ({cells})  "
                               f"{reason}", markup=False, soft_wrap=True)

    def advance(self, result: CellResult) -> None:
        self.counts[str(result.outcome)] += 1
        summary = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, advance=1, description=summary)
        elif result.outcome is Outcome.NOT_RUN and not self.verbose:
            key = (result.environment, result.hardware_target,
                   result.reason.splitlines()[0][:100] if result.reason else "")
            self.held[key] = self.held.get(key, 0) + 1
        else:
            self.flush()
            done = sum(self.counts.values())
            reason = f"  {result.reason.splitlines()[0][:100]}" if result.reason else ""
            self.console.print(f"[{done}/{self.total}] {result.outcome:<10} {result.environment}"
                               f" {result.case_id}::{result.variant} @{result.hardware_target}"
                               f"{reason}", markup=False, soft_wrap=True)

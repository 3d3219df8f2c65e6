"""Progress with counts per outcome: a live bar on a terminal, one line per cell elsewhere; a
suite's session in pytest's words; cells not run one line per environment, target and reason."""

from __future__ import annotations

import sys
import time
from collections import Counter
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.core.results import CellResult, Outcome
from harness.plan.suites import pytest_words

EVERY = 10.0  # seconds between a running session's counts off a terminal


def pytest_duration(seconds: float) -> str:
    """As pytest says a session's duration: "41.20s", past a minute "75.00s (0:01:15)"."""
    if seconds < 60:
        return f"{seconds:.2f}s"
    whole = int(seconds)
    return f"{seconds:.2f}s ({whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d})"


class RunProgress:
    def __init__(self, total: int, *, live: bool | None = None, verbose: bool = False
                 ) -> None:
        self.total = total
        self.verbose = verbose
        self.counts: Counter[str] = Counter()
        # (environment, hardware, reason) -> how many NOT_RUN cells wait to be said in one line
        self.held: Counter[tuple[str, str, str]] = Counter()
        self.live = sys.stderr.isatty() if live is None else live
        self.console = Console(stderr=True, highlight=False)
        self.bar: Progress | None = None
        self.tests: Counter[str] = Counter()  # every suite's tests, in pytest's words
        self.running: dict[str, Counter[str]] = {}  # by session: its tests so far
        self.attempts: dict[str, int] = {}  # by session: the attempt its tests come from
        self.said_at: dict[str, float] = {}  # by session: when its count was last said
        self.every = EVERY

    def __enter__(self) -> RunProgress:
        if self.live:
            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=self.console)
            self.bar.__enter__()
            self.bar.add_task("running", total=self.total)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.flush()
        if self.tests:  # the suites' tests together, as pytest would count them
            self.note(f"tests: {pytest_words(self.tests)}")
        if self.bar is not None:
            self.bar.__exit__(et, ev, tb)

    def note(self, message: str) -> None:
        self.flush()
        self.console.print(message, markup=False, soft_wrap=True)

    def flush(self) -> None:
        """Say the NOT_RUN cells held so far, a line per environment × hardware × reason."""
        held, self.held = self.held, Counter()
        for (environment, hardware, reason), count in held.items():
            cells = f"{count} cells" if count > 1 else "1 cell"
            self.console.print(f"{'not run':<10} {environment} @{hardware} ({cells})  "
                               f"{reason}", markup=False, soft_wrap=True)

    def advance(self, result: CellResult) -> None:
        if result.parent:
            self._test(result)
            return
        self.counts[str(result.outcome)] += 1
        ended = self._ended(result) if "suite" in result.details else None
        if self.bar is not None:
            self.bar.update(self.bar.task_ids[0], advance=1, description=self._description())
        if ended is not None:
            self.note(ended)
        elif self.bar is not None:
            return
        elif result.outcome is Outcome.NOT_RUN and not self.verbose:
            key = (result.environment, result.hardware_target,
                   result.reason.splitlines()[0][:100] if result.reason else "")
            self.held[key] += 1
        else:
            reason = f"  {result.reason.splitlines()[0][:100]}" if result.reason else ""
            self.note(f"[{sum(self.counts.values())}/{self.total}] {result.outcome:<10} "
                      f"{result.environment} {result.case_id}::{result.variant} "
                      f"@{result.hardware_target}{reason}")

    def _test(self, result: CellResult) -> None:
        """A suite's test ended: counted in its session's running count."""
        word = str(result.details.get("pytest") or result.outcome.lower())
        parent = result.parent or ""
        if self.attempts.setdefault(parent, result.attempt) != result.attempt:
            # Retried: the session runs its tests again from the start; count them once.
            self.tests -= self.running.pop(parent, Counter())
            self.attempts[parent] = result.attempt
        self.tests[word] += 1
        running = self.running.setdefault(parent, Counter())
        running[word] += 1
        if self.bar is not None:
            self.bar.update(self.bar.task_ids[0], description=self._description())
            return
        now = time.monotonic()
        if now - self.said_at.get(parent, -self.every) >= self.every:
            self.said_at[parent] = now
            n = running.total()
            self.note(f"{result.environment}: {n} test{'s' if n > 1 else ''} so far "
                      f"({pytest_words(running)})  {result.case_id} @{result.hardware_target}")

    def _ended(self, result: CellResult) -> str:
        """A session's end, as pytest's summary line says it, then its suite and target."""
        self.attempts.pop(result.cell_id, None)
        counts = Counter({str(w): int(n) for w, n in
                          result.details["suite"].get("counts", {}).items()})
        # The run's tests: this session's as it counts them (with those kept by a resume).
        self.tests += counts
        self.tests -= self.running.pop(result.cell_id, Counter())
        words = pytest_words(counts) or "no tests ran"
        reason = (result.reason.splitlines() or [""])[0][:200]
        # A session that failed as a whole (no collection, the package from elsewhere).
        verdict = f"  {result.outcome}: {reason}" if result.outcome is Outcome.ERROR else ""
        return (f"{result.environment}: {words} in {pytest_duration(result.duration)}"
                f"  ({result.case_id} @{result.hardware_target}){verdict}")

    def _description(self) -> str:
        """What the bar says: the tests in pytest's words, then cells by outcome."""
        cells = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        if not self.tests:
            return cells
        return f"tests: {pytest_words(self.tests)}" + (f" | cells: {cells}" if cells else "")

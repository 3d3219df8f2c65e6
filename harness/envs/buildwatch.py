"""A source build said as it goes: a line when it starts, one a minute, one when it ends."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import psutil

from harness.core.matrix import EnvSpec

EVERY = 60.0  # seconds: a CI log silent for 40 minutes reads as a hung job


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def watched(spec: EnvSpec, places: Sequence[str], *, every: float | None = None,
            say: Callable[[str], None] = _stderr) -> Iterator[None]:
    """Around the build of ``spec``, if it builds from source: what and why when it starts,
    how long and the step it is in (``current_step``) every ``every`` seconds, and its end."""
    if not spec.source_builds:
        yield
        return
    what = ", ".join(b.dist for b in spec.source_builds)
    why = ("--refresh asked for a new build" if spec.refresh_before else
           "not built on this machine yet")
    say(f"environment {spec.name}: building {what} from source (the matrix's build: "
        f"setting; {why})")
    started, stop = time.monotonic(), threading.Event()
    interval = EVERY if every is None else every

    def beat() -> None:
        while not stop.wait(interval):
            step = current_step(places)
            say(f"environment {spec.name}: still building {what} from source, "
                f"{_elapsed(time.monotonic() - started)}"
                + (f"; now: {step}" if step else ""))

    ticker = threading.Thread(target=beat, name=f"build progress {spec.name}", daemon=True)
    ticker.start()
    ended = "failed"
    try:
        yield
        ended = "done"
    finally:
        stop.set()
        ticker.join()
        say(f"environment {spec.name}: building {what} from source {ended} after "
            f"{_elapsed(time.monotonic() - started)}")


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def current_step(places: Sequence[str]) -> str | None:
    """The newest process under one whose command line names one of ``places``, as its
    program and the last argument that names a file (``nvcc ... gemm.cu``)."""
    if not places:
        return None
    below: list[tuple[float, list[str]]] = []
    for root in psutil.process_iter(["cmdline"]):
        if not any(place in arg for arg in root.info["cmdline"] or () for place in places):
            continue
        # The build's own command (uv) is not a step; what it started is, its interpreter too.
        with contextlib.suppress(psutil.Error):
            for proc in root.children(recursive=True):
                with contextlib.suppress(psutil.Error):  # ended meanwhile
                    below.append((proc.create_time(), proc.cmdline()))
    return _describe(max(below)[1]) if below else None


def _describe(argv: list[str]) -> str | None:
    if not argv:
        return None
    files = [a for a in argv[1:] if not a.startswith("-") and "." in Path(a).name]
    shown = Path(argv[0]).name + (f" ... {'/'.join(Path(files[-1]).parts[-3:])}"
                                  if files else "")
    return shown[:200]

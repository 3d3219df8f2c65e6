"""What a suite's session collected in an environment, kept so that ``harness plan`` names the
tests; keyed by the environment, target, suite settings and the suite's files' stamps."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import msgspec

from harness.core import atomic
from harness.core.matrix import EnvSpec, SuiteSpec
from harness.core.paths import default_cache_dir
from harness.core.words import plural
from harness.plan.suites import CONFIG_FILES, rootdir

FOLDER = "collected"  # under the harness's cache folder
#: Files above a suite's folder (up to its rootdir) that change what pytest collects there.
_ABOVE = ("conftest.py", *(name for name, _ in CONFIG_FILES))


class Collected(msgspec.Struct, frozen=True):
    """A suite's tests in one environment, as its last session there collected them."""

    tests: tuple[str, ...]  # stable node ids (``run.suite.stable_nodeid``), pytest's order
    errors: Annotated[int, msgspec.Meta(ge=0)]  # modules that did not collect
    at: Annotated[float, msgspec.Meta(ge=0, lt=1e11)]  # when (seconds since the epoch)

    def line(self) -> str:
        errors = f", {plural(self.errors, 'module')} did not collect" if self.errors else ""
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.at))
        return (f"{plural(len(self.tests), 'test')}{errors} "
                f"(as collected there {when})")


def key(env: EnvSpec, suite: SuiteSpec, hardware: str) -> str | None:
    """The cache key of ``suite`` in ``env`` on ``hardware``; None when its files cannot be read."""
    settings = {k: v for k, v in suite.to_dict().items() if k not in ("timeout", "workers")}
    try:
        stamps = _stamps(Path(suite.path)) if suite.path is not None else []
    except (OSError, RecursionError):
        return None
    blob = json.dumps([env.key, hardware, settings, stamps], sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def save(key: str | None, env: EnvSpec, suite: SuiteSpec, tests: Sequence[str], errors: int,
         *, cache_dir: Path | None = None) -> None:
    """Keep what a session collected under ``key`` (taken when it started); best effort."""
    if key is None:
        return
    path = (cache_dir or default_cache_dir()) / FOLDER / f"{key}.json"
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, json.dumps({"suite": suite.name, "environment": env.name,
                                            "tests": list(tests), "errors": errors,
                                            "at": time.time()}))


def load(env: EnvSpec, suite: SuiteSpec, hardware: str, *, cache_dir: Path | None = None
         ) -> Collected | None:
    """What the last session of ``suite`` in ``env`` on ``hardware`` collected, if still valid."""
    found = key(env, suite, hardware)
    if found is None:
        return None
    path = (cache_dir or default_cache_dir()) / FOLDER / f"{found}.json"
    try:
        return msgspec.json.decode(path.read_bytes(), type=Collected)
    except (OSError, msgspec.MsgspecError):
        return None  # none kept, or damaged: unknown, as before any run


def _stamps(folder: Path) -> list[tuple[str, int, int]]:
    """Every file under ``folder`` (hidden and caches apart), and the config and conftest files
    above it up to its rootdir."""
    if not folder.is_dir():  # walk says nothing of a missing folder
        raise FileNotFoundError(folder)
    top_dir = rootdir(folder)
    files: list[str] = []
    seen: set[str] = set()  # folders walked, by their real path: a symlink loop ends
    for top, dirs, names in os.walk(folder, followlinks=True):  # as pytest collects
        seen.add(os.path.realpath(top))
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                         and os.path.realpath(os.path.join(top, d)) not in seen)  # noqa: PTH118
        files += (os.path.join(top, n) for n in sorted(names))  # noqa: PTH118
    above = folder
    while above != top_dir and above.is_relative_to(top_dir):
        above = above.parent
        files += (str(above / n) for n in _ABOVE if (above / n).is_file())
    return [(f, (s := os.stat(f)).st_size, s.st_mtime_ns) for f in files]  # noqa: PTH116

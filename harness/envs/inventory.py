"""What environments this machine's cache holds, and which of them ``envs prune`` removes."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.backends import REGISTRY
from harness.core.matrix import EnvSpec
from harness.envs import Backend, get_backend
from harness.plan import collected

#: Removed only by ``prune --all``: built wheels, preflight venvs, what suites collected.
EXTRA_FOLDERS = ("uv-build-cache", "preflight", collected.FOLDER)


@dataclass(frozen=True, kw_only=True)
class Pruning:
    removed: tuple[dict[str, Any], ...]  # listing entries
    extras: tuple[Path, ...]  # EXTRA_FOLDERS that were there
    kept: int


def backends(cache: Path) -> dict[str, Backend]:
    return {name: get_backend(name, cache) for name in REGISTRY}


def listing(cache: Path) -> list[dict[str, Any]]:
    """Every environment of every backend under ``cache``."""
    return [entry for backend in backends(cache).values() for entry in backend.listing()]


def prune(cache: Path, keep: Iterable[EnvSpec] | None, *, dry_run: bool = False) -> Pruning:
    """Remove the environments no spec in ``keep`` makes (``None``: all, and the extra
    folders) and the ``stale`` ones; ``dry_run`` removes nothing and says the same."""
    found = backends(cache)
    entries = [e for b in found.values() for e in b.listing()]
    wanted = set() if keep is None else {
        (env.backend, found[env.backend].listing_key(env)) for env in keep
        if env.backend in found}
    removed = [e for e in entries if e.get("stale") or (e["backend"], e["key"]) not in wanted]
    extras = [cache / name for name in EXTRA_FOLDERS if keep is None and (cache / name).exists()]
    if not dry_run:
        for entry in removed:
            found[entry["backend"]].remove_location(entry["location"])
        for extra in extras:
            shutil.rmtree(extra, ignore_errors=True)
    return Pruning(removed=tuple(removed), extras=tuple(extras), kept=len(entries) - len(removed))

"""The lock (``matrix.lock.json``): what each release query resolved to, so plans agree and a
machine without the index plans; ``harness lock`` and ``--refresh`` ask again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.core.atomic import write_text
from harness.core.errors import UsageError
from harness.core.matrix import EnvSpec, requirement_name
from harness.core.releases import ReleaseQuery, Resolution, Target
from harness.matrix.releases import IndexFile, machine_platform, project_files, select, version_of
from harness.matrix.sources import find_links_folders, offline_from_environment

LOCK_FORMAT = "ml-compat-harness lock 1"

Key = tuple[str, str]  # (query text, target key)


def lock_path(matrix: Path) -> Path:
    return matrix.with_name(matrix.stem + ".lock.json")


@dataclass
class Releases:
    """Answers release queries; ``mode``: ``lock`` asks the index for what the lock lacks,
    ``refresh`` for everything, ``offline`` never."""

    path: Path
    mode: str = "lock"
    find_links: tuple[str, ...] = ()
    locked: dict[Key, Resolution] = field(default_factory=dict)
    used: dict[Key, Resolution] = field(default_factory=dict)
    files: dict[tuple[str, tuple[str, ...]], list[IndexFile]] = field(default_factory=dict)

    @classmethod
    def for_matrix(cls, matrix: Path, *, mode: str = "lock",
                   find_links: tuple[str, ...] = ()) -> Releases:
        path = lock_path(matrix)
        return cls(path=path, mode=mode, find_links=find_links, locked=read_lock(path))

    @classmethod
    def for_run(cls, matrix: Path, find_links: Sequence[str | Path], offline: bool, mode: str
                ) -> Releases:
        """For a command's --find-links and --offline (or their variables)."""
        return cls.for_matrix(matrix, find_links=find_links_folders(find_links),
                              mode="offline" if offline_from_environment(offline) else mode)

    def resolve(self, query: ReleaseQuery, python: str, indexes: tuple[str, ...]
                ) -> Resolution:
        target = Target(python=python, platform=machine_platform(), indexes=indexes,
                        find_links=self.find_links, offline=self.mode == "offline")
        key = (query.text, target.key)
        if key in self.used:
            return self.used[key]
        found = self.locked.get(key)
        if found is not None and self.mode != "refresh":
            resolution = replace(found, source="lock")
        elif self.mode == "offline" and not self.find_links:
            raise UsageError(f"{query.text} (Python {python}) is not in {self.path.name}, and "
                             "--offline asks no index: run `harness lock` where the index is "
                             "reachable, or give --find-links")
        else:
            files = self._files(query.dist, indexes)
            resolution = select(query, files, target, resolved_at=time.time())
        self.used[key] = resolution
        return resolution

    def _files(self, dist: str, indexes: tuple[str, ...]) -> list[IndexFile]:
        """One listing per project and indexes, for every Python."""
        if (dist, indexes) not in self.files:
            self.files[(dist, indexes)] = project_files(dist, indexes=indexes,
                                                        find_links=self.find_links,
                                                        offline=self.mode == "offline")
        return self.files[(dist, indexes)]

    def changes(self) -> list[str]:
        """What moved since the lock was written: releases new to a query, and gone."""
        lines = []
        for key, now in sorted(self.used.items()):
            before = self.locked.get(key)
            if before is None:
                lines.append(f"new query: {now.query.text} (Python {now.target.python}): "
                             + (", ".join(now.versions) or "no release"))
                continue
            came = [v for v in now.versions if v not in before.versions]
            went = [v for v in before.versions if v not in now.versions]
            for verb, versions in (("new", came), ("gone", went)):
                if versions:
                    lines.append(f"{verb}: {now.query.dist} {', '.join(versions)} "
                                 f"({now.query.text}, Python {now.target.python})")
        return lines

    def check_release(self, given: str, dist: str, version: Version, indexes: tuple[str, ...]
                      ) -> None:
        """Refuse ``--set given=version`` when neither the lock nor the environment's indexes
        have that release."""
        name = canonicalize_name(dist)
        if any(r.query.dist == name and str(version) in r.versions
               for r in self.locked.values()):
            return
        have = {v for f in self._files(name, indexes)
                if (v := version_of(name, f.filename)) is not None}
        if version in have or (self.mode == "offline" and not have):
            return
        near = sorted(v for v in have if v.release[:2] == version.release[:2])[-3:]
        raise UsageError(f"--set {given}={version}: {dist} has no release {version} in "
                         f"{' or '.join(('the index', *indexes, *self.find_links))}"
                         + (f" (nearest: {', '.join(map(str, sorted(near)))})" if near else "")
                         + "; nothing was built")

    def save(self, *, prune: bool = False) -> bool:
        """Write what was resolved over the lock; False when unchanged. ``prune``: this
        platform's entries not asked now go."""
        platform = machine_platform()
        kept = {k: r for k, r in self.locked.items()
                if not prune or r.target.platform != platform}
        kept.update(self.used)
        if _entries(kept) == _entries(self.locked):
            return False
        write_text(self.path, json.dumps({"format": LOCK_FORMAT, "resolutions": _entries(kept)},
                                         indent=1, sort_keys=True) + "\n")
        self.locked = kept
        return True


def check_sets(releases: Releases, sets: tuple[tuple[str, str], ...], envs: Iterable[EnvSpec],
               distributions: dict[str, str]) -> None:
    """Refuse, before anything builds, a ``--set`` release the environments' indexes lack."""
    for given, value in sets:
        try:
            version = Version(value)
        except InvalidVersion:
            continue
        names = {canonicalize_name(given),
                 canonicalize_name(requirement_name(distributions.get(given, given)))}
        asked = {(req.name, env.index_urls) for env in envs
                 for req in map(Requirement, env.requirements)
                 if canonicalize_name(req.name) in names and str(req.specifier) == f"=={value}"}
        for dist, indexes in sorted(asked):
            releases.check_release(given, dist, version, indexes)


def read_lock(path: Path) -> dict[Key, Resolution]:
    if not path.is_file():
        return {}
    def unreadable(why: object) -> UsageError:
        return UsageError(f"{path}: not a lock this harness reads ({why}); delete it and run "
                          "`harness lock`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise unreadable(exc) from None
    if not isinstance(data, dict) or data.get("format") != LOCK_FORMAT:
        raise unreadable(f"format {data.get('format') if isinstance(data, dict) else None!r}")
    try:
        found = [Resolution.from_dict(entry) for entry in data["resolutions"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise unreadable(exc) from None
    return {(r.query.text, r.target.key): r for r in found}


def _entries(resolutions: dict[Key, Resolution]) -> list[dict[str, Any]]:
    # Where this machine's packages came from is not what the query resolved to.
    return [{k: v for k, v in r.to_dict().items() if k not in ("source", "find_links", "offline")}
            for _, r in sorted(resolutions.items())]

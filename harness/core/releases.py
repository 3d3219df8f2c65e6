"""Axes that follow the index (``torch: {releases: ">=2.0,<3"}``): the query, and what it
resolved to (``harness.matrix.releases`` answers it and keeps it in the lock)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from packaging.version import InvalidVersion, Version

#: How a query picks among the matching releases.
PICKS = ("latest-patch", "all")


@dataclass(frozen=True, kw_only=True)
class ReleaseQuery:
    """The releases of ``dist`` an axis takes: in ``releases``, each minor's newest patch or
    ``all``, of the ``latest`` minor series; pre, yanked, sdist-only ones only if asked."""

    dist: str  # the distribution (``transformer-engine``), canonical
    releases: str = ""  # a specifier; "" is any
    pick: str = "latest-patch"
    latest: int | None = None
    pre: bool = False
    yanked: bool = False
    sdist: bool = False

    @property
    def text(self) -> str:
        """The query as one stable line: the lock's key, and how the plan names it."""
        parts = [self.dist + (self.releases or " (any release)"), f"pick={self.pick}"]
        parts += [f"latest={self.latest}"] if self.latest is not None else []
        parts += [name for name in ("pre", "yanked", "sdist") if getattr(self, name)]
        return " ".join(parts)


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where the releases must install: a Python, a platform, indexes and find-links folders."""

    python: str  # "3.11"
    platform: str  # the machine's system and architecture, as wheels name it: linux_x86_64
    indexes: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    offline: bool = False

    @property
    def key(self) -> str:
        """A lock entry's key: not the folders, so an offline machine reads the same entry."""
        return json.dumps([self.python, self.platform, list(self.indexes)],
                          separators=(",", ":"))


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """What a query resolved to for one target: versions (oldest first), and those left out
    with why."""

    query: ReleaseQuery
    target: Target
    versions: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...] = ()
    resolved_at: float = 0.0
    source: str = "index"  # "index": asked now; "lock": read from the lock file

    def to_dict(self) -> dict[str, Any]:
        return {"query": asdict(self.query), "text": self.query.text, **asdict(self.target),
                "versions": list(self.versions), "left_out": dict(self.left_out),
                "resolved_at": self.resolved_at, "source": self.source}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Resolution:
        query = ReleaseQuery(**data["query"])
        target = Target(python=data["python"], platform=data["platform"],
                        indexes=tuple(data.get("indexes", ())),
                        find_links=tuple(data.get("find_links", ())),
                        offline=bool(data.get("offline", False)))
        return cls(query=query, target=target, versions=tuple(data["versions"]),
                   left_out=tuple(dict(data.get("left_out", {})).items()),
                   resolved_at=float(data.get("resolved_at", 0.0)),
                   source=data.get("source", "lock"))

    def lines(self) -> list[str]:
        """How a plan says what the query became."""
        head = (f"{self.query.text} for Python {self.target.python}: "
                + (", ".join(self.versions) or "no release")
                + f" (from the {self.source})")
        return [head, *(f"  left out {v}: {why}" for v, why in self.left_out)]


T = TypeVar("T")


def in_force(items: Sequence[T], value: str, version_of: Callable[[T], str]) -> T:
    """The item in force at release ``value``: the newest at most ``value``, else the oldest;
    for a value that is no version (``*``, ``<2``), the newest."""
    ranked = sorted(items, key=lambda item: release_order(version_of(item)))
    target = parsed(value.lstrip("="))
    if target is None:
        return ranked[-1]
    below = [i for i in ranked if release_order(version_of(i)) <= (1, target)]
    return below[-1] if below else ranked[0]


def release_order(text: str) -> tuple[int, Any]:
    """A sort key: versions in order, after anything that is not one (``*``, ``<2``)."""
    version = parsed(str(text).lstrip("="))
    return (0, str(text)) if version is None else (1, version)


def parsed(text: str) -> Version | None:
    """``text`` as a version; None when it is not one."""
    try:
        return Version(text)
    except InvalidVersion:
        return None

"""Answer a release query from a package's files on an index (pure): the versions it takes for
one target, and those left out, with why."""

from __future__ import annotations

import re
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from packaging import tags
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from harness.core.releases import ReleaseQuery, Resolution, Target


@dataclass(frozen=True)
class IndexFile:
    """One file of a project on an index (PEP 503/691), or in a --find-links folder."""

    filename: str
    yanked: bool = False
    requires_python: str | None = None


def query_at(axis: str, values: object) -> tuple[int, ...] | None:
    """Where an axis's release query is: ``()`` for the axis, ``(i,)`` for a list's query item
    (``releases:`` or ``latest:``, no ``axis`` key), None for none."""
    if isinstance(values, dict):
        return ()
    for i, value in enumerate(values if isinstance(values, list) else ()):
        if isinstance(value, dict) and axis not in value and {"releases", "latest"} & set(value):
            return (i,)
    return None


def machine_platform() -> str:
    """This machine as wheel tags name it, without the libc level (linux_x86_64): the lock's key."""
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


@cache
def supported_tags(python: str) -> frozenset[tags.Tag]:
    """The wheel tags an interpreter ``python`` ("3.11") on this machine installs."""
    version = tuple(int(p) for p in python.split(".")[:2])
    platforms = list(tags.platform_tags())
    interpreter = f"cp{version[0]}{version[1]}"
    return frozenset([*tags.cpython_tags(version, platforms=platforms),
                      *tags.compatible_tags(version, interpreter=interpreter,
                                            platforms=platforms)])


def select(query: ReleaseQuery, files: Iterable[IndexFile], target: Target, *,
           resolved_at: float = 0.0) -> Resolution:
    """The versions ``query`` takes among ``files`` for ``target``, oldest first."""
    by_version: dict[Version, list[IndexFile]] = {}
    for file in files:
        version = version_of(query.dist, file.filename)
        if version is not None:
            by_version.setdefault(version, []).append(file)
    spec = SpecifierSet(query.releases)
    candidates = [v for v in by_version
                  if spec.contains(v, prereleases=query.pre) and (query.pre or not v.is_prerelease)]
    usable, why_not = [], {}
    for version in candidates:
        reason = _unusable(by_version[version], query, target)
        if reason:
            why_not[version] = reason
        else:
            usable.append(version)
    chosen = pick(query, usable)
    # Reported: what the query would have taken were every release usable.
    left_out = [v for v in pick(query, candidates) if v in why_not]
    return Resolution(query=query, target=target, versions=tuple(str(v) for v in chosen),
                      left_out=tuple((str(v), why_not[v]) for v in left_out),
                      resolved_at=resolved_at, source="index")


def pick(query: ReleaseQuery, versions: Sequence[Version]) -> list[Version]:
    """Each minor's newest patch or all, of the ``latest`` minor series; oldest first."""
    series: dict[tuple[int, int], list[Version]] = {}
    for version in sorted(set(versions)):
        series.setdefault(_minor(version), []).append(version)
    kept = sorted(series)
    if query.latest is not None:
        kept = kept[-query.latest:] if query.latest > 0 else []
    if query.pick == "all":
        return [v for minor in kept for v in series[minor]]
    return [series[minor][-1] for minor in kept]


def valid_specifier(text: str) -> bool:
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return False
    return True


def _minor(version: Version) -> tuple[int, int]:
    release = (*version.release, 0)
    return release[0], release[1]


def version_of(dist: str, filename: str) -> Version | None:
    """The version a file of ``dist`` holds; None for another project's or an odd name."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return version if canonicalize_name(name) == canonicalize_name(dist) else None


def _unusable(files: list[IndexFile], query: ReleaseQuery, target: Target) -> str:
    """Why no file of one release installs on ``target`` ("" when one does)."""
    if not query.yanked and all(f.yanked for f in files):
        return "yanked"
    supported = supported_tags(target.python)
    python = Version(target.python)
    fits_python = [f for f in files if not f.requires_python
                   or _requires(f.requires_python).contains(python, prereleases=True)]
    if not fits_python:
        return f"requires Python {files[0].requires_python}"
    wheels = [f for f in fits_python if f.filename.endswith(".whl")]
    if any(parse_wheel_filename(f.filename)[3] & supported for f in wheels):
        return ""
    if query.sdist and any(not f.filename.endswith(".whl") for f in fits_python):
        return ""
    have = ("source only; sdist: true takes it" if not wheels
            else "wheels only for other Pythons or platforms")
    return f"no wheel for cp{target.python.replace('.', '')} on {target.platform} ({have})"


@cache
def _requires(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:  # an index's odd metadata does not make a release unusable
        return SpecifierSet()

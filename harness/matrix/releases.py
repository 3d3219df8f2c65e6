"""Release queries: a project's files on simple API indexes (PEP 691/503, ``file://`` too) and
in ``--find-links`` folders, the versions a query takes among them for a target (and why not),
and the lock (``matrix.lock.json``) that keeps them so that plans agree and run offline."""

from __future__ import annotations

import json
import os
import re
import ssl
import sysconfig
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from packaging import tags
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from harness.core.atomic import write_text
from harness.core.errors import UsageError
from harness.core.matrix import EnvSpec, requirement_name
from harness.core.releases import ReleaseQuery, Resolution, Target
from harness.matrix.sources import find_links_folders, offline_from_environment


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
    why_not = {v: why for v in candidates if (why := _unusable(by_version[v], query, target))}
    chosen = pick(query, [v for v in candidates if v not in why_not])
    # Reported: what the query would have taken were every release usable.
    left_out = [v for v in pick(query, candidates) if v in why_not]
    return Resolution(query=query, target=target, versions=tuple(str(v) for v in chosen),
                      left_out=tuple((str(v), why_not[v]) for v in left_out),
                      resolved_at=resolved_at, source="index")


def pick(query: ReleaseQuery, versions: Sequence[Version]) -> list[Version]:
    """Each minor's newest patch or all, of the ``latest`` minor series; oldest first."""
    series: dict[tuple[int, ...], list[Version]] = {}
    for version in sorted(set(versions)):
        series.setdefault((*version.release, 0)[:2], []).append(version)
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
    python = Version(target.python)
    fits_python = [f for f in files if not f.requires_python
                   or _requires(f.requires_python).contains(python, prereleases=True)]
    if not fits_python:
        return f"requires Python {files[0].requires_python}"
    wheels = [f for f in fits_python if f.filename.endswith(".whl")]
    if any(parse_wheel_filename(f.filename)[3] & supported_tags(target.python) for f in wheels):
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


#: Where uv (and so the harness's environments) install from when nothing else is said.
PYPI = "https://pypi.org/simple"
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"
TIMEOUT = 60.0


def default_index() -> str:
    """The index uv installs from: its own settings, then pip's, then PyPI."""
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(name):
            return os.environ[name]
    return PYPI


def project_files(dist: str, *, indexes: Iterable[str] = (), find_links: Iterable[str] = (),
                  offline: bool = False) -> list[IndexFile]:
    """Every file of ``dist`` the indexes and ``find_links`` list (only the folders offline)."""
    name = canonicalize_name(dist)
    files = [f for folder in find_links for f in _folder(Path(folder), name)]
    if not offline:
        for url in (default_index(), *indexes):
            files += _index(url, name)
    return files


def _folder(folder: Path, name: str) -> list[IndexFile]:
    """A --find-links folder: every file in it whose name is of ``name``."""
    try:
        entries = sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError as exc:
        raise UsageError(f"--find-links {folder}: {exc.strerror}") from None
    prefix = name.replace("-", "_")
    return [IndexFile(e) for e in entries
            if canonicalize_name(e.split("-", 1)[0]).replace("-", "_") == prefix]


def _index(url: str, name: str) -> list[IndexFile]:
    page = url.rstrip("/") + f"/{name}/"
    body, kind = _local(page) if page.startswith("file://") else _get(page)
    if body is None:
        return []  # this index does not have the project: another may
    if "json" in kind:
        return _from_json(body, page)
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    return parser.files


def _local(page: str) -> tuple[bytes | None, str]:
    """A folder laid out as a simple index: ``<project>/index.json`` (or ``index.html``)."""
    folder = Path(urllib.parse.unquote(urllib.parse.urlparse(page).path))
    for name in ("index.json", "index.html"):
        if (folder / name).is_file():
            return (folder / name).read_bytes(), name
    return None, ""


def _get(url: str, attempts: int = 3) -> tuple[bytes | None, str]:
    """The page at ``url`` and its content type; None for a 404; a reset or a 5xx retried."""
    request = urllib.request.Request(url, headers={"Accept": _ACCEPT,
                                                   "User-Agent": "ml-compat-harness"})
    context = ssl.create_default_context()
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as reply:
                return reply.read(), reply.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):
                return None, ""
            if exc.code < 500 or attempt == attempts - 1:
                raise UsageError(f"cannot list releases at {url}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            if attempt == attempts - 1:
                reason = getattr(exc, "reason", exc)
                raise UsageError(f"cannot list releases at {url}: {reason} (plan from the "
                                 "lock with --offline, or check the network)") from None
        time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def _from_json(body: bytes, where: str) -> list[IndexFile]:
    try:
        data = json.loads(body)
        return [IndexFile(f["filename"], yanked=bool(f.get("yanked")),
                          requires_python=f.get("requires-python") or None)
                for f in data["files"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{where}: not a simple API page: {exc}") from None


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.files: list[IndexFile] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        found = dict(attrs)
        href = found.get("href") or ""
        filename = urllib.parse.unquote(urllib.parse.urlparse(href).path.rsplit("/", 1)[-1])
        if filename:
            # HTMLParser has already unescaped the attribute (&lt;3.12 -> <3.12).
            self.files.append(IndexFile(filename, yanked="data-yanked" in found,
                                        requires_python=found.get("data-requires-python")))


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

    def check_sets(self, sets: tuple[tuple[str, str], ...], envs: Iterable[EnvSpec],
                   distributions: dict[str, str]) -> None:
        """Refuse, before anything builds, a ``--set`` release that neither the lock nor the
        environments' indexes have."""
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
                name = canonicalize_name(dist)
                if any(r.query.dist == name and str(version) in r.versions
                       for r in self.locked.values()):
                    continue
                have = {v for f in self._files(name, indexes)
                        if (v := version_of(name, f.filename)) is not None}
                if version in have or (self.mode == "offline" and not have):
                    continue
                near = sorted(v for v in have if v.release[:2] == version.release[:2])[-3:]
                raise UsageError(f"--set {given}={version}: {dist} has no release {version} in "
                                 f"{' or '.join(('the index', *indexes, *self.find_links))}"
                                 + (f" (nearest: {', '.join(map(str, near))})" if near else "")
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
        text = json.dumps({"format": LOCK_FORMAT, "resolutions": _entries(kept)}, indent=1,
                          sort_keys=True) + "\n"
        try:
            write_text(self.path, text)
        except OSError as exc:  # a read-only checkout; a matrix read from a pipe
            raise UsageError(f"cannot write {self.path}: {exc.strerror}") from None
        self.locked = kept
        return True


def read_lock(path: Path) -> dict[Key, Resolution]:
    def unreadable(why: object) -> UsageError:
        return UsageError(f"{path}: not a lock this harness reads ({why}); delete it and run "
                          "`harness lock`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except OSError as exc:  # a folder of that name, a name too long
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
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

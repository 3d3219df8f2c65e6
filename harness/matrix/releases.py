"""Release queries: a project's files on simple API indexes (PEP 691/503, ``file://`` too) and
in ``--find-links`` folders; the versions a query takes among them for a target, and why not."""

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
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

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

from harness.core.errors import UsageError
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

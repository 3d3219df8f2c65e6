"""A project's files as the places an environment installs from list them: simple API indexes
(PEP 691 JSON or PEP 503 HTML, ``file://`` too) and ``--find-links`` folders."""

from __future__ import annotations

import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path

from packaging.utils import canonicalize_name

from harness.core.errors import UsageError
from harness.matrix.releases import IndexFile

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

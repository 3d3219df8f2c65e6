"""Wheels of source-only distributions, built once and filed in a wheel folder under a content
key (``DIST-VERSION-DIGEST/wheel-key.json``): a wheel built against another torch never fits."""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.core.matrix import BuildSetting, EnvSpec
from harness.inenv import harness_probe
from harness.matrix.sources import is_url

MANIFEST = "wheel-key.json"
INDEX = "wheel-keys.json"  # every key folder's manifest, for a wheel folder served at a URL
FROM_FOLDER = "from the wheel folder"
#: Build variables that change how long a build takes, not what it makes.
UNKEYED = frozenset({"MAX_JOBS"})


@dataclass(frozen=True, kw_only=True)
class WheelKey:
    """What a compiled wheel fits: ``archs`` are the SM numbers it holds code for."""

    dist: str
    version: str
    torch: str  # the torch it was compiled against ("2.5.1", "2.0.1+cu118"); "" for none
    cuda: str
    python: str
    archs: tuple[str, ...]
    settings: tuple[tuple[str, str], ...]

    @property
    def folder(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return f"{self.dist}-{self.version}-{hashlib.sha256(blob).hexdigest()[:16]}"

    def refusal(self, wanted: WheelKey, needs: frozenset[str]) -> str | None:
        """Why this wheel does not fit where ``wanted`` is built for GPUs ``needs``, or None."""
        for name in ("torch", "cuda", "python"):
            mine, theirs = getattr(self, name), getattr(wanted, name)
            if mine != theirs:
                return (f"built for {name} {mine or 'none'}, this environment has "
                        f"{name} {theirs or 'none'}")
        if self.settings != wanted.settings:
            return (f"built with {_words(self.settings)}, this environment builds with "
                    f"{_words(wanted.settings)}")
        missing = sorted(needs - set(self.archs), key=int) if self.archs else []
        if missing:
            return (f"built for sm_{', sm_'.join(self.archs)}, not for this machine's "
                    f"sm_{', sm_'.join(missing)}")
        return None


def _words(settings: tuple[tuple[str, str], ...]) -> str:
    return " ".join(f"{k}={v}" for k, v in settings) or "no settings"


@dataclass(frozen=True, kw_only=True)
class Filed:
    """A wheel in a key folder, as its manifest says."""

    key: WheelKey
    folder: Path  # a wheel folder's URL: only the key folder's name
    wheel: str
    pin: str = ""  # what the environment asked for (a git URL has no version before its build)
    source: str = ""  # the URL the matrix names it by, for a distribution it names so
    facts: dict[str, Any] = field(default_factory=dict)  # size, build seconds
    url: str = ""  # the key folder's URL, when its wheel folder is one

    @property
    def where(self) -> str:  # the key folder as ``--find-links`` takes it
        return f"{self.url}/" if self.url else str(self.folder)

    @property
    def wheel_url(self) -> str:
        return f"{self.url}/{self.wheel}" if self.url else (self.folder / self.wheel).as_uri()


def url_sources(spec: EnvSpec) -> dict[str, str]:
    """The distributions ``spec`` names by a URL that is not a wheel (git, an sdist): URL."""
    out: dict[str, str] = {}
    for line in spec.requirements:
        with contextlib.suppress(InvalidRequirement):
            req = Requirement(line)
            if req.url and not req.url.split("#")[0].endswith(".whl"):
                out[canonicalize_name(req.name)] = req.url
    return out


def isolated_key(spec: EnvSpec, dist: str, version: str = "") -> WheelKey:
    """A wheel built in isolation from a URL: compiled against no torch."""
    return WheelKey(dist=dist, version=version, torch="", cuda="", python=spec.python,
                    archs=(), settings=())


def wanted_key(spec: EnvSpec, setting: BuildSetting, *, torch: str, version: str = "",
               archs: tuple[str, ...] = ()) -> WheelKey:  # built in ``spec``'s environment
    return WheelKey(dist=canonicalize_name(setting.dist), version=version, torch=torch,
                    cuda=spec.cuda or "", python=spec.python, archs=archs,
                    settings=tuple(sorted((k, v) for k, v in setting.env if k not in UNKEYED)))


def pinned_torch(requirements: Sequence[str]) -> str:
    """The torch release ``requirements`` (or a ``pip freeze``) pin with ``==``, without its
    local label (the key's CUDA tells builds apart), or ""."""
    for line in requirements:
        with contextlib.suppress(InvalidRequirement):
            req = Requirement(line)
            pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
            if canonicalize_name(req.name) == "torch" and len(pins) == 1 and "*" not in pins[0]:
                return pins[0].split("+")[0]
    return ""


def filed(folders: Sequence[str]) -> list[Filed]:
    """Every keyed wheel in the wheel folders (a URL's: those its ``wheel-keys.json`` lists)."""
    out = []
    for folder in folders:
        if is_url(folder):
            base = folder.rstrip("/")
            with contextlib.suppress(OSError, ValueError):  # no keyed wheels there
                with urllib.request.urlopen(f"{base}/{INDEX}", timeout=60) as answer:
                    listed = json.loads(answer.read())
                out += [_entry(data, Path(data["folder"]), f"{base}/{data['folder']}")
                        for data in listed]
            continue
        for manifest in sorted(Path(folder).glob(f"*/{MANIFEST}")):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                data = json.loads(manifest.read_text())
                if (manifest.parent / data["wheel"]).is_file():
                    out.append(_entry(data, manifest.parent))
    return out


def _entry(data: dict[str, Any], folder: Path, url: str = "") -> Filed:
    key = WheelKey(**{**data["key"], "archs": tuple(data["key"]["archs"]),
                      "settings": tuple(map(tuple, data["key"]["settings"]))})
    return Filed(key=key, folder=folder, wheel=data["wheel"], pin=data.get("pin", ""),
                 source=data.get("source", ""), facts=data.get("facts", {}), url=url)


def _manifest(entry: Filed) -> dict[str, Any]:
    return {"key": asdict(entry.key), "wheel": entry.wheel, "pin": entry.pin,
            "source": entry.source, "facts": entry.facts}


def write_manifest(entry: Filed) -> None:
    """The key folder's manifest, and a page linking its wheel (a find-links URL reads it)."""
    (entry.folder / MANIFEST).write_text(json.dumps(_manifest(entry), indent=1) + "\n")
    (entry.folder / "index.html").write_text(_links([entry.wheel]))


def write_index(folder: Path) -> None:
    """For a wheel folder served over http(s): a page of its wheels, its manifests in a file."""
    (folder / "index.html").write_text(_links(sorted(p.name for p in folder.glob("*.whl"))))
    listed = [{**_manifest(e), "folder": e.folder.name} for e in filed([str(folder)])]
    (folder / INDEX).write_text(json.dumps(listed, indent=1) + "\n")


def _links(names: list[str]) -> str:
    links = "".join(f'<a href="{html.escape(n)}">{html.escape(n)}</a><br>\n' for n in names)
    return f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n"


def pin_parts(pin: str) -> tuple[str, str]:
    """A resolution line's distribution and ``==`` version ("" for a URL), or ("", "")."""
    try:
        req = Requirement(pin.split(";", 1)[0])
    except InvalidRequirement:
        return "", ""
    return canonicalize_name(req.name), next(
        (str(s.version) for s in req.specifier if s.operator == "=="), "")


def holds(entries: list[Filed], pin: str) -> bool:
    """Whether a keyed wheel was built for ``pin`` (its name and version, or its URL)."""
    name, version = pin_parts(pin)
    return any(e.pin == pin or (e.key.dist, e.key.version) == (name, version) for e in entries)


def gpu_archs() -> frozenset[str]:
    """The SM numbers of this machine's GPUs ("90")."""
    with contextlib.suppress(Exception):  # no driver, no nvidia-smi: a CPU machine
        return frozenset(str(g["arch"]).removeprefix("sm_").rstrip("a")
                         for g in harness_probe.probe_gpus())
    return frozenset()


@dataclass(frozen=True)
class Choice:
    """What a wheel folder offers one environment, and each same-named wheel refused, why."""

    offered: tuple[Filed, ...]
    refused: tuple[tuple[Filed, str], ...]

    def provenance(self, installed: dict[str, str], dists: tuple[str, ...],
                   built: set[str]) -> list[str]:  # each of ``dists`` from the folder or built
        out = []
        for dist in dists:
            version = installed.get(dist)
            took = [e for e in self.offered if e.key.dist == dist and e.key.version == version]
            if took:
                out.append(f"{dist} {version} {FROM_FOLDER} (key {took[0].folder.name})")
            elif dist in built:
                why = [f"{e.folder.name}: {reason}" for e, reason in self.refused
                       if e.key.dist == dist and e.key.version == version]
                out.append(f"{dist} {version} built here" + (f"; refused {why[0]}" if why else ""))
        return out

    def swapped(self, requirements: Sequence[str]) -> list[str]:
        """Each URL an offered wheel was built from named by that wheel instead (a git URL
        would be cloned and built, whatever else is offered)."""
        wheels = {(e.key.dist, e.source): e for e in self.offered if e.source}
        out = []
        for line in requirements:
            with contextlib.suppress(InvalidRequirement):
                req = Requirement(line)
                entry = wheels.get((canonicalize_name(req.name), req.url or ""))
                if entry is not None:
                    req.url = entry.wheel_url
                    line = str(req)
            out.append(line)
        return out


def took_wheels(provenance: Sequence[str]) -> bool:  # a compiled wheel of a wheel folder
    return any(FROM_FOLDER in line for line in provenance)


def choose(spec: EnvSpec, torch: str, needs: frozenset[str]) -> Choice:
    """The keyed wheels of ``spec.find_links`` that fit (any version: the resolver picks),
    and those that do not; ``torch``: the release it pins ("" for none)."""
    settings: dict[str, BuildSetting] = {canonicalize_name(s.dist): s for s in spec.source_builds}
    urls = url_sources(spec)
    offered, refused = [], []
    for entry in filed(spec.find_links):
        setting = settings.get(entry.key.dist)
        if setting is not None and torch:
            wanted = wanted_key(spec, setting, torch=torch)
        elif setting is None and entry.source and urls.get(entry.key.dist) == entry.source:
            wanted = isolated_key(spec, entry.key.dist)
        else:
            continue
        why = entry.key.refusal(wanted, needs)
        if why is None:
            offered.append(entry)
        else:
            refused.append((entry, why))
    return Choice(offered=tuple(offered), refused=tuple(refused))

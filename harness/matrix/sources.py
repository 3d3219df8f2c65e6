"""Where environments come from: wheel folders (``--find-links``, ``HARNESS_FIND_LINKS``; a URL
requirement with a wheel there is installed from it) and an image registry (``--registry``)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from harness.core.backends import REGISTRY
from harness.core.errors import UsageError
from harness.core.matrix import EnvSpec, MatrixSpec

ENV_VAR = "HARNESS_FIND_LINKS"
OFFLINE_VAR = "HARNESS_OFFLINE"
REGISTRY_VAR = "HARNESS_REGISTRY"
REGISTRY_FORM = re.compile(r"[\w.-]+(:\d+)?(/[a-z0-9._-]+)+")


def is_url(where: str) -> bool:
    """Whether a --find-links entry is an http(s) URL rather than a folder."""
    return where.startswith(("http://", "https://"))


def find_links_folders(given: Sequence[str | Path]) -> tuple[str, ...]:
    """``--find-links`` folders and http(s) URLs, then ``HARNESS_FIND_LINKS`` (separated by
    spaces, or folders by os.pathsep)."""
    from_env = [part for word in os.environ.get(ENV_VAR, "").split()
                for part in ([word] if is_url(word) else word.split(os.pathsep)) if part]
    out = []
    for i, where in enumerate((*map(str, given), *from_env)):
        if is_url(where):
            out.append(where)
        elif Path(where).is_dir():
            out.append(str(Path(where).resolve()))
        else:
            source = "--find-links" if i < len(given) else ENV_VAR
            raise UsageError(f"{source} {where}: not a folder, nor an http(s) URL")
    return tuple(dict.fromkeys(out))


def wheels_by_name(folders: Sequence[str | Path], python: str) -> dict[str, Path]:
    """The newest wheel of each distribution in the folders that installs on ``python``."""
    best: dict[str, tuple[Version, Path]] = {}
    for folder in map(Path, (f for f in map(str, folders) if not is_url(f))):
        for wheel in sorted(folder.glob("*.whl")):
            try:
                name, version, _, tags = parse_wheel_filename(wheel.name)
            except InvalidWheelFilename:
                continue
            if not any(_fits(tag, python) for tag in tags):
                continue
            if name not in best or version > best[name][0]:
                best[name] = (version, wheel)
    return {name: path for name, (_, path) in best.items()}


def _fits(tag: Tag, python: str) -> bool:
    """A wheel for ``python`` on this machine (local backends install here): a folder may
    also hold the same release built for another platform."""
    major, _, minor = python.partition(".")
    interpreters = {f"py{major}", f"py{major}{minor}", f"cp{major}{minor}"}
    return (tag.interpreter in interpreters and tag.abi in {"none", "abi3", f"cp{major}{minor}"}
            and tag.platform in _platforms())


@functools.cache
def _platforms() -> frozenset[str]:
    return frozenset({"any", *(t.platform for t in sys_tags())})


def with_find_links(spec: MatrixSpec, folders: Sequence[str | Path], *, offline: bool = False,
                    registry: str | None = None) -> MatrixSpec:
    """Point the local installers at ``folders`` (``offline``: at nothing else), and the Docker
    backend at ``registry`` (default: ``HARNESS_REGISTRY``)."""
    source = "--registry" if registry else REGISTRY_VAR
    registry = registry or os.environ.get(REGISTRY_VAR) or None
    if registry and not REGISTRY_FORM.fullmatch(registry):
        raise UsageError(f"{source} {registry!r}: not HOST[:PORT]/NAME (lowercase, no tag)")
    if not folders and not offline and not registry:
        return spec
    envs = tuple(replace(_env_with(env, folders, offline) if REGISTRY[env.backend].local
                         else env, registry=registry) for env in spec.environments)
    return replace(spec, environments=envs)


def _env_with(env: EnvSpec, folders: Sequence[str | Path], offline: bool) -> EnvSpec:
    """Folders stay out of the key; only a URL requirement swapped for a wheel changes it."""
    wheels = wheels_by_name(folders, env.python)
    requirements = tuple(_swap(r, wheels) for r in env.requirements)
    return replace(env, requirements=requirements, find_links=tuple(str(f) for f in folders),
                   offline=offline)


def offline_from_environment(flag: bool) -> bool:
    """``--offline``, or HARNESS_OFFLINE read as uv reads UV_OFFLINE (0, false, no, off: not)."""
    return flag or os.environ.get(OFFLINE_VAR, "").lower() not in ("", "0", "false", "no", "off")


def _swap(requirement: str, wheels: dict[str, Path]) -> str:
    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return requirement
    wheel = wheels.get(canonicalize_name(req.name))
    if req.url is None or wheel is None:
        return requirement
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f" ; {req.marker}" if req.marker else ""
    return f"{req.name}{extras} @ {wheel.as_uri()}{marker}"

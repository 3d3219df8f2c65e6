"""The matrix as data: what matrix.yaml defines, in frozen dataclasses every stage reads."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.core.defaults import MAX_CELLS
from harness.core.errors import SpecError
from harness.core.releases import Resolution
from harness.core.rules import Rule

DEFAULT_TIMEOUT = 900.0


@dataclass(frozen=True, kw_only=True)
class CaseSelector:
    """One entry of a ``cases:`` list: a case id glob, a path, or ``marker:NAME``."""

    pattern: str
    where: str  # "matrix.yaml:12: matrices.cpu.cases[0]", for errors raised once cases are known


@dataclass(frozen=True, kw_only=True)
class BuildSetting:
    """How one distribution is built from source (``build:``). ``isolation: false`` builds it
    against the environment's own torch, after ``requires``; ``nvcc`` is checked first."""

    dist: str
    via: tuple[str, ...] = ()  # requirements that pull ``dist`` in (transformer-engine)
    isolation: bool = True
    requires: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    nvcc: str | None = None

    def applies_to(self, requirement_names: set[str]) -> bool:
        return bool({self.dist, *self.via} & requirement_names)


@dataclass(frozen=True, kw_only=True)
class SuiteSpec:
    """A maintainer's own pytest suite (``suites:``), one pytest process per environment:
    ``path`` or ``pyargs``; ``packages`` must import from site-packages; ``workers``: xdist."""

    name: str
    path: str | None = None
    pyargs: str | None = None
    packages: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None
    workers: int = 1
    where: str = ""  # "matrix.yaml:12", for errors raised once the suite runs

    @property
    def target(self) -> str:
        """What the suite is, as a reader names it: its folder or its package."""
        return self.path or f"--pyargs {self.pyargs}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "pyargs": self.pyargs,
                "packages": list(self.packages), "args": list(self.args),
                "env": dict(self.env), "timeout": self.timeout, "workers": self.workers}


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """Everything that defines one environment. ``key`` hashes what changes its content."""

    name: str
    origin: str
    values: tuple[tuple[str, str], ...]
    backend: str
    python: str
    requirements: tuple[str, ...]
    pins: tuple[tuple[str, str], ...]
    index_urls: tuple[str, ...] = ()
    cuda: str | None = None
    image: str | None = None
    env_vars: tuple[tuple[str, str], ...] = ()
    hardware: tuple[str, ...] = ("cpu",)
    cases: tuple[CaseSelector, ...] = ()
    suites: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    network: bool = False
    memory: str | None = None  # "16g": a container's limit, or a local cell's rlimit
    builds: tuple[BuildSetting, ...] = ()  # the matrix's build settings that apply here
    base: str | None = None  # an overlay's interpreter ("host", a command or a path)
    # Set per run and not in the key: where packages come from, not what is installed.
    find_links: tuple[str, ...] = ()  # local wheel folders
    offline: bool = False  # install from find_links only; never touch an index
    registry: str | None = None  # HOST[:PORT]/NAME: Docker images pulled from and pushed to
    retries: int = 0  # a failed cell is run again this many times; failed-then-passed: FLAKY
    # Rebuild if built before this time (--refresh): once per machine, not per worker.
    refresh_before: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """For the run record: what the environment was asked to hold."""
        return {"name": self.name, "key": self.key, "origin": self.origin,
                "values": dict(self.values), "backend": self.backend, "python": self.python,
                "requirements": list(self.requirements), "index_urls": list(self.index_urls),
                "cuda": self.cuda, "image": self.image, "env": dict(self.env_vars),
                "hardware": list(self.hardware), "timeout": self.timeout, "base": self.base,
                "builds": [asdict(b) for b in self.builds]}

    @property
    def source_builds(self) -> tuple[BuildSetting, ...]:
        """The build settings that build a package inside this environment, not isolated."""
        return tuple(b for b in self.builds if not b.isolation)

    @cached_property
    def key(self) -> str:
        content: dict[str, Any] = {
            "backend": self.backend, "python": self.python, "requirements": self.requirements,
            "index_urls": self.index_urls, "image": self.image, "env": self.env_vars,
        }
        if self.base:
            content["base"] = self.base
        if self.cuda:
            content["cuda"] = self.cuda
        if self.builds:  # only when set: environments without them keep their keys
            content["builds"] = [asdict(b) for b in self.builds]
        blob = json.dumps(content, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class MatrixSpec:
    file: str
    cases_dir: Path
    environments: tuple[EnvSpec, ...] = field(default_factory=tuple)
    cases_dir_line: int | None = None  # where an error about the cases folder points
    runners: dict[str, tuple[str, ...]] = field(default_factory=dict)  # CI labels per target
    body_line: int | None = None  # where the environments start (matrices: or environments:)
    expect: tuple[Rule, ...] = ()  # what some cells are known to show (harness.expect)
    max_cells: int = MAX_CELLS  # a plan past it is refused (--max-cells)
    suites: tuple[SuiteSpec, ...] = ()
    resolutions: tuple[Resolution, ...] = ()
    sets: tuple[tuple[str, str], ...] = ()  # --set KEY=VALUE, as given
    set_notes: tuple[str, ...] = ()  # where each --set landed
    distributions: dict[str, str] = field(default_factory=dict)  # axis -> distribution

    @property
    def needs_cases(self) -> bool:
        """Whether any environment runs cases of ``cases_dir`` (not only suites)."""
        return any(env.cases or not env.suites for env in self.environments)

    def runner_for(self, hardware: str) -> list[str]:
        """A shard's runner labels: ``runners:``, else ubuntu-latest or self-hosted + arch."""
        if hardware in self.runners:
            return list(self.runners[hardware])
        return ["ubuntu-latest"] if hardware == "cpu" else ["self-hosted", hardware]

    def cases_error(self, message: str) -> SpecError:
        return SpecError(message, file=self.file, line=self.cases_dir_line or 1,
                         path="cases_dir")


#: What a pin that is a specifier, not a version, starts with (``<2``, ``>=2.1``, ``~=1.4``).
OPERATORS = ("<", ">", "=", "!", "~")


def requirement_for(dist: str, value: str) -> str:
    """``torch`` + ``2.1.2`` -> ``torch==2.1.2``; ``numpy`` + ``<2`` -> ``numpy<2``;
    a URL -> ``name @ url``; ``*`` -> unpinned."""
    value = value.strip()
    if value == "*":
        return dist
    if "://" in value:
        return f"{dist} @ {value}"
    if value.startswith(OPERATORS):
        return f"{dist}{value}"
    return f"{dist}=={value}"


def is_pin(dist: str, value: str) -> bool:
    """Whether ``value`` is a pin of ``dist``: a version, a specifier, ``*`` or a URL."""
    try:
        Requirement(requirement_for(dist, value))
    except InvalidRequirement:
        return False
    return True


@lru_cache(maxsize=4096)
def requirement_name(requirement: str) -> str:
    """``transformer-engine[pytorch]==2.2.0`` -> ``transformer-engine`` (normalized)."""
    return canonicalize_name(Requirement(requirement).name)


def memory_bytes(text: str) -> int:
    """``16g`` -> bytes (docker's units: k, m, g; none is bytes)."""
    units = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def short_value(value: str) -> str:
    """How a pin reads in names and tables: a URL shrinks to its ref, ``git@v0.10``."""
    scheme, sep, path = value.partition("://")
    if not sep:
        return value
    if "@" in path.rsplit("/", 1)[-1]:
        ref = path.rsplit("@", 1)[1]
        if re.fullmatch(r"[0-9a-f]{40}", ref):  # a full commit reads as git does: 12 digits
            ref = ref[:12]
        return f"{scheme.split('+')[0]}@{ref}"
    return path.rstrip("/").rsplit("/", 1)[-1]



"""Packages built from source inside an environment (``build:`` in matrix.yaml), one place for
what the uv backend, the Docker images and the preflight all need to agree on."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.core.errors import EnvBuildError
from harness.core.matrix import EnvSpec, requirement_name
from harness.inenv import harness_probe


def build_requirements(spec: EnvSpec) -> list[str]:
    """What the source builds compile against, installed before them; a name the environment
    pins (torch) takes the environment's pin."""
    pinned = {requirement_name(r): r for r in spec.requirements}
    out: list[str] = []
    for setting in spec.source_builds:
        for req in setting.requires:
            chosen = pinned.get(requirement_name(req), req)
            if chosen not in out:
                out.append(chosen)
    return out


def no_isolation_args(spec: EnvSpec) -> list[str]:
    return [flag for b in spec.source_builds for flag in ("--no-build-isolation-package", b.dist)]


def build_variables(spec: EnvSpec) -> dict[str, str]:
    """The builds' own variables; and CUDA_HOME, which torch's extension builder otherwise
    guesses from the nvcc on PATH (wrong where nvcc is a wrapper script)."""
    variables: dict[str, str] = {}
    for setting in spec.source_builds:
        variables.update(setting.env)
    toolkit = harness_probe.cuda_home()
    if toolkit and spec.source_builds:
        variables.setdefault("CUDA_HOME", toolkit)
    return variables


def check_nvcc(spec: EnvSpec, found: str | None) -> None:
    """A source build that cannot work with this machine's CUDA compiler fails minutes deep in
    setup.py (torch refuses a compiler of another CUDA major than its own); say it first."""
    for setting in spec.source_builds:
        if setting.nvcc is None:
            continue
        if found is None:
            raise EnvBuildError(f"building {setting.dist} needs nvcc {setting.nvcc}; "
                                "no nvcc on PATH or in /usr/local/cuda")
        if not SpecifierSet(setting.nvcc).contains(found, prereleases=True):
            raise EnvBuildError(f"building {setting.dist} needs nvcc {setting.nvcc}; "
                                f"this machine has {found}")
        if spec.cuda and spec.cuda != "cpu" and _major(spec.cuda) != _major(found):
            raise EnvBuildError(
                f"building {setting.dist} for CUDA {spec.cuda} needs an nvcc "
                f"{_major(spec.cuda)}.x (torch refuses another major); this machine has {found}")


def _major(version: str) -> int | None:
    try:
        return Version(version).major
    except InvalidVersion:
        return None

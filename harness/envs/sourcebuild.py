"""Packages built from source in an environment (``build:``): what the uv backend, the Docker
images and the preflight agree on."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.core.errors import EnvBuildError
from harness.core.matrix import EnvSpec, requirement_name
from harness.envs import toolkit
from harness.envs.base import purelib
from harness.inenv import harness_probe


def build_requirements(spec: EnvSpec) -> list[str]:
    """What the source builds compile against, installed first, at the environment's pins."""
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
    """The builds' own variables, and CUDA_HOME (torch's guess fails on an nvcc wrapper)."""
    variables: dict[str, str] = {}
    for setting in spec.source_builds:
        variables.update(setting.env)
    toolkit = harness_probe.cuda_home()
    if toolkit and spec.source_builds:
        variables.setdefault("CUDA_HOME", toolkit)
    return variables


def check_nvcc(spec: EnvSpec, found: str | None) -> None:
    """A build this machine's nvcc cannot do fails minutes deep in setup.py: say it first."""
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


def compiler(spec: EnvSpec, cache_dir: Path) -> tuple[str | None, dict[str, str]]:
    """The nvcc version a source build uses and the variables that point it there: this
    machine's if its CUDA major fits, else Debian's (``envs.toolkit``), for one architecture."""
    found = harness_probe.nvcc_version()
    wanted = spec.cuda if spec.cuda and spec.cuda != "cpu" else None
    needs = any(s.nvcc for s in spec.source_builds)
    if not needs or wanted is None or (found is not None and _major(found) == _major(wanted)):
        return found, {}
    chosen = toolkit.for_cuda(wanted)
    root = toolkit.provide(chosen, cache_dir)
    arch = newest_arch(spec)
    return chosen.cuda, {"CUDA_HOME": str(root),
                         "PATH": f"{root / 'bin'}:{os.environ.get('PATH', os.defpath)}",
                         "NVTE_CUDA_ARCHS": arch,
                         "TORCH_CUDA_ARCH_LIST": f"{arch[:-1]}.{arch[-1]}"}


def newest_arch(spec: EnvSpec) -> str:
    """The highest architecture the environment targets, as nvcc numbers it ("100" > "90")."""
    archs = [h.removeprefix("sm_").rstrip("a") for h in spec.hardware if h.startswith("sm_")]
    return max(archs, key=int) if archs else "90"


def runtime_variables(location: str | Path, cuda_home: str | None,
                      inherited: str = "") -> dict[str, str]:
    """Built against a fetched toolkit: it as ``CUDA_HOME`` and the venv's ``nvidia/*/lib``
    ahead of ``inherited`` on the loader path (TE's library has no RUNPATH); else empty."""
    if not cuda_home:
        return {}
    libs = sorted(str(p) for p in Path(location).glob("lib/python*/site-packages/nvidia/*/lib")
                  if p.is_dir())
    loader = os.pathsep.join(part for part in (*libs, inherited) if part)
    return {"CUDA_HOME": cuda_home, **({"LD_LIBRARY_PATH": loader} if loader else {})}


#: Headers no CUDA toolkit brings, from the environment's own PyPI packages (TE includes both).
PIP_HEADERS = ("cudnn", "nccl")


def header_variables(python: str) -> dict[str, str]:
    """``CPATH`` to the environment's own cuDNN and NCCL headers, and ``CUDNN_PATH``."""
    try:
        nvidia = purelib(python) / "nvidia"
    except (OSError, subprocess.SubprocessError):
        return {}
    includes = [str(nvidia / lib / "include") for lib in PIP_HEADERS
                if (nvidia / lib / "include").is_dir()]
    out = {"CPATH": os.pathsep.join(includes)} if includes else {}
    if (nvidia / "cudnn" / "include").is_dir():
        out["CUDNN_PATH"] = str(nvidia / "cudnn")
    return out


# gcc/clang `file.cpp:12:5: error: ...`, nvcc `file.cu(12): error: ...`, `nvcc fatal   : ...`.
_COMPILER_ERROR = re.compile(
    r"(?P<file>[^\s:()]+\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|hh))"
    r"(?P<at>:\d+(?::\d+)?:|\(\d+\):)\s*(?P<kind>(?:fatal )?error):?\s*(?P<what>.+)"
    r"|(?P<nvcc>nvcc fatal\s*:\s*.+)")


def first_compiler_error(text: str) -> str | None:
    """The first error a compiler printed, as ``file:line: error: ...`` (the file's last three
    path parts): what uv's last lines of a failed build do not say."""
    for line in text.splitlines():
        found = _COMPILER_ERROR.search(line)
        if found is None:
            continue
        if found["nvcc"]:
            return found["nvcc"].strip()
        short = "/".join(Path(found["file"]).parts[-3:])
        return f"{short}{found['at'].rstrip(':')}: {found['kind']}: {found['what'].strip()}"[:400]
    return None

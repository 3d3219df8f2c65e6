"""Packages built from source in an environment (``build:``): what the uv backend, the Docker
images and the preflight agree on; and a CUDA toolkit from Debian's packages for a build whose
CUDA major this machine's nvcc is not (downloaded by apt with a private state)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from harness.core import atomic
from harness.core.errors import EnvBuildError
from harness.core.matrix import EnvSpec, requirement_name
from harness.core.releases import parsed
from harness.envs.base import locked, purelib
from harness.inenv import harness_probe


def build_requirements(spec: EnvSpec) -> list[str]:
    """What the source builds compile against, installed first, at the environment's pins."""
    pinned = {requirement_name(r): r for r in spec.requirements}
    return list(dict.fromkeys(pinned.get(requirement_name(req), req)
                              for setting in spec.source_builds for req in setting.requires))


def no_isolation_args(spec: EnvSpec) -> list[str]:
    return [flag for b in spec.source_builds for flag in ("--no-build-isolation-package", b.dist)]


def build_variables(spec: EnvSpec) -> dict[str, str]:
    """The builds' own variables, and CUDA_HOME (torch's guess fails on an nvcc wrapper)."""
    variables = {k: v for setting in spec.source_builds for k, v in setting.env}
    home = harness_probe.cuda_home()
    return {"CUDA_HOME": home, **variables} if home and spec.source_builds else variables


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
        if not _fits(spec, found):
            raise EnvBuildError(f"building {setting.dist} for CUDA {spec.cuda} needs an nvcc "
                                f"{_major(str(spec.cuda))}.x (torch refuses another major); "
                                f"this machine has {found}")


def _major(text: str) -> int | None:
    version = parsed(text)
    return version.major if version else None


def _fits(spec: EnvSpec, nvcc: str | None) -> bool:
    """Whether ``nvcc`` builds for the environment's CUDA major (a CPU one: any nvcc)."""
    return not spec.cuda or spec.cuda == "cpu" or (
        nvcc is not None and _major(nvcc) == _major(spec.cuda))


def compiler(spec: EnvSpec, cache_dir: Path) -> tuple[str | None, dict[str, str]]:
    """The nvcc version a source build uses and the variables that point it there: this
    machine's if its CUDA major fits, else Debian's (``provide``), for one architecture."""
    found = harness_probe.nvcc_version()
    if not any(s.nvcc for s in spec.source_builds) or _fits(spec, found):
        return found, {}
    chosen = for_cuda(str(spec.cuda))
    root = provide(chosen, cache_dir)
    arch = newest_arch(spec)
    return chosen.cuda, {"CUDA_HOME": str(root),
                         "PATH": f"{root / 'bin'}:{os.environ.get('PATH', os.defpath)}",
                         "NVTE_CUDA_ARCHS": arch,
                         "TORCH_CUDA_ARCH_LIST": f"{arch[:-1]}.{arch[-1]}"}


def target_archs(spec: EnvSpec) -> tuple[str, ...]:
    """The architectures the environment targets, as nvcc numbers them, lowest first."""
    return tuple(sorted({h.removeprefix("sm_").rstrip("a") for h in spec.hardware
                         if h.startswith("sm_")}, key=int))


def newest_arch(spec: EnvSpec) -> str:
    return (target_archs(spec) or ("90",))[-1]  # "100" > "90"


def runtime_variables(location: str | Path, cuda_home: str | None,
                      inherited: str = "", prebuilt: bool = False) -> dict[str, str]:
    """Built against a fetched toolkit (or ``prebuilt`` elsewhere): the venv's ``nvidia/*/lib``
    before ``inherited`` on the loader path (TE's has no RUNPATH), the toolkit as CUDA_HOME."""
    if not cuda_home and not prebuilt:
        return {}
    libs = sorted(str(p) for p in Path(location).glob("lib/python*/site-packages/nvidia/*/lib")
                  if p.is_dir())
    loader = os.pathsep.join(part for part in (*libs, inherited) if part)
    return {**({"CUDA_HOME": cuda_home} if cuda_home else {}),
            **({"LD_LIBRARY_PATH": loader} if loader else {})}


def own_cuda_home(spec: EnvSpec, location: str | Path) -> str | None:
    """Compiled elsewhere, on a machine with no toolkit of its CUDA major: the environment's
    own ``nvidia/`` packages as CUDA_HOME (TE finds NVRTC there)."""
    if _fits(spec, harness_probe.nvcc_version()):
        return None
    nvidia = next(Path(location).glob("lib/python*/site-packages/nvidia"), None)
    return str(nvidia) if nvidia else None


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


@dataclass(frozen=True, kw_only=True)
class DebianToolkit:
    """One CUDA toolkit from one Debian suite."""

    cuda: str  # the toolkit's release, as nvcc says it
    suite: str
    packages: tuple[str, ...]  # what to unpack: the toolkit and the CUDA libraries it links

    @property
    def name(self) -> str:
        return f"cuda-{self.cuda}-debian-{self.suite}"


#: By CUDA major; what a build uses (a stub libcuda comes with nvidia-cuda-dev).
TOOLKITS = {
    12: DebianToolkit(cuda="12.4", suite="trixie", packages=(
        "nvidia-cuda-toolkit", "nvidia-cuda-dev", "libcudart12", "libcublas12",
        "libcublaslt12", "libcusparse12", "libcurand10", "libcusolver11", "libcusolvermg11",
        "libcufft11", "libcufftw11", "libnvrtc12", "libnvrtc-builtins12.4", "libnvvm4",
        "libnvjitlink12", "libcupti12", "libcupti-dev", "libthrust-dev", "libcub-dev",
        "libcu++-dev", "libnvtoolsext1", "libnvfatbin12", "libnvblas12", "libnvidia-ml-dev",
        "libaccinj64-12.4", "libcuinj64-12.4")),
}
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MARKER = "toolkit.json"
#: Debian's tools nvcc runs, beside nvcc in a CUDA root's bin/.
_TOOLS = ("ptxas", "fatbinary", "cudafe++", "nvlink", "bin2c", "cuobjdump", "nvdisasm",
          "nvprune", "cu++filt")
_PROFILE = """\
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
"""


def for_cuda(cuda: str) -> DebianToolkit:
    try:
        return TOOLKITS[int(cuda.split(".")[0])]
    except (KeyError, ValueError):
        raise EnvBuildError(f"no Debian CUDA toolkit for CUDA {cuda} here (known: "
                            + ", ".join(f"{t.cuda} from {t.suite}" for t in TOOLKITS.values())
                            + "); install one and set CUDA_HOME") from None


def provide(toolkit: DebianToolkit, cache_dir: Path) -> Path:
    """The toolkit's CUDA root under ``cache_dir``, fetched and laid out on first use."""
    root = cache_dir / "toolkits" / toolkit.name
    with locked(root.with_name(root.name + ".lock")):
        if (root / MARKER).is_file():
            return root / "cuda"
        for tool in ("apt-get", "dpkg"):
            if shutil.which(tool) is None:
                raise EnvBuildError(f"fetching Debian's CUDA {toolkit.cuda} toolkit needs "
                                    f"{tool} (a Debian or Ubuntu machine); or install a CUDA "
                                    f"{toolkit.cuda.split('.')[0]} toolkit and set CUDA_HOME")
        shutil.rmtree(root, ignore_errors=True)
        debs = _download(toolkit, root / "apt")
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(root / "debian")], f"unpacking {deb.name}")
        shutil.rmtree(root / "apt", ignore_errors=True)  # the downloaded .deb files
        _lay_out(root / "debian", root / "cuda")
        atomic.write_text(root / MARKER, json.dumps(asdict(toolkit)))
    return root / "cuda"


def _download(toolkit: DebianToolkit, state: Path) -> Path:
    """The .deb files, by apt with a state of its own (the machine's is left alone)."""
    for sub in ("lists/partial", "archives/partial", "debs"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    sources = state / "sources.list"
    sources.write_text(f"deb [signed-by={KEYRING}] {MIRROR} {toolkit.suite} main contrib "
                       "non-free\n")
    (state / "status").touch()
    options = [f"-oDir::Etc::sourcelist={sources}", "-oDir::Etc::sourceparts=-",
               f"-oDir::State={state}", f"-oDir::State::status={state / 'status'}",
               f"-oDir::Cache={state}", "-oAPT::Architecture=amd64",
               "-oAPT::Sandbox::User=root", "-qq"]
    _run(["apt-get", *options, "update"], f"reading Debian {toolkit.suite}'s package lists")
    _run(["apt-get", *options, "download", *toolkit.packages],
         f"downloading the CUDA {toolkit.cuda} toolkit from Debian {toolkit.suite}",
         cwd=state / "debs")
    return state / "debs"


def _lay_out(debian: Path, cuda: Path) -> None:
    """A CUDA root over the unpacked packages: links, and nvcc beside a profile of our own."""
    shutil.rmtree(cuda, ignore_errors=True)
    (cuda / "bin").mkdir(parents=True)
    (cuda / "nvvm").mkdir()
    toolkit_bin = debian / "usr/lib/nvidia-cuda-toolkit/bin"
    for name in ("nvcc", "cicc"):
        shutil.copy2(toolkit_bin / name, cuda / "bin" / name)
    shutil.copytree(toolkit_bin / "crt", cuda / "bin" / "crt")
    (cuda / "bin" / "nvcc.profile").write_text(_PROFILE)
    for tool in _TOOLS:
        (cuda / "bin" / tool).symlink_to(debian / "usr/bin" / tool)
    (cuda / "include").symlink_to(debian / "usr/include")
    (cuda / "lib64").symlink_to(debian / "usr/lib/x86_64-linux-gnu")
    (cuda / "nvvm" / "libdevice").symlink_to(debian / "usr/lib/nvidia-cuda-toolkit/libdevice")


def _run(argv: list[str], what: str, cwd: Path | None = None) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                          env=env, text=True, errors="replace", check=False, timeout=3600)
    if done.returncode != 0:
        tail = " | ".join(done.stdout.strip().splitlines()[-3:])
        raise EnvBuildError(f"{what} failed (exit {done.returncode}): {tail}")

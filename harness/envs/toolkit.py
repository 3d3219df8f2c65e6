"""A CUDA toolkit from Debian's packages for a build whose CUDA major this machine's nvcc is
not: downloaded by apt with a private state, unpacked into the cache as a CUDA root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.core import atomic
from harness.core.errors import EnvBuildError
from harness.envs.base import locked


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
    root.parent.mkdir(parents=True, exist_ok=True)
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
        atomic.write_text(root / MARKER, json.dumps({"cuda": toolkit.cuda, "suite":
                                                     toolkit.suite,
                                                     "packages": list(toolkit.packages)}))
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
    with tempfile.TemporaryFile() as log:
        done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                              check=False, timeout=3600)
        if done.returncode != 0:
            log.seek(0)
            tail = " | ".join(log.read().decode(errors="replace").strip().splitlines()[-3:])
            raise EnvBuildError(f"{what} failed (exit {done.returncode}): {tail}")

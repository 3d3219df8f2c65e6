"""Debian's CUDA toolkit, for a build whose CUDA major this machine's nvcc is not."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.errors import EnvBuildError
from harness.core.matrix import BuildSetting, EnvSpec
from harness.core.paths import default_cache_dir
from harness.envs import sourcebuild

CUBLAS = """
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
__global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }
int main() { cublasHandle_t h; cublasCreate(&h); float* d; cudaMalloc(&d, 16);
             twice<<<1, 4>>>(d); return 0; }
"""


def spec(cuda: str | None, *, nvcc: str | None = ">=12.0") -> EnvSpec:
    return EnvSpec(name="te", origin="t", values=(), backend="uv", python="3.11",
                   requirements=("transformer-engine[pytorch]==2.4.0",), pins=(), cuda=cuda,
                   hardware=("sm_80", "sm_90"),
                   builds=(BuildSetting(dist="transformer-engine-torch", isolation=False,
                                        nvcc=nvcc),))


def test_the_toolkit_is_chosen_by_the_environments_cuda_major() -> None:
    assert sourcebuild.for_cuda("12.4").suite == "trixie"
    assert sourcebuild.for_cuda("12.1").cuda == "12.4"  # any 12.x: torch checks the major
    with pytest.raises(EnvBuildError, match=r"no Debian CUDA toolkit for CUDA 10\.2 here"):
        sourcebuild.for_cuda("10.2")


def test_one_architecture_the_newest_the_environment_targets() -> None:
    assert sourcebuild.newest_arch(spec("12.4")) == "90"
    blackwell = replace(spec("12.8"), hardware=("sm_90a", "sm_100", "cpu"))
    assert sourcebuild.newest_arch(blackwell) == "100"  # as text "100" < "90"
    assert sourcebuild.target_archs(blackwell) == ("90", "100")  # what `envs build` compiles
    assert sourcebuild.newest_arch(replace(blackwell, hardware=("cpu",))) == "90"


def test_a_fitting_nvcc_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                         ) -> None:
    monkeypatch.setattr(sourcebuild.harness_probe, "nvcc_version", lambda: "12.6")
    assert sourcebuild.compiler(spec("12.4"), tmp_path) == ("12.6", {})
    assert sourcebuild.compiler(spec("12.4", nvcc=None), tmp_path) == ("12.6", {})
    assert not (tmp_path / "toolkits").exists()  # nothing fetched


@pytest.mark.slow
def test_debians_toolkit_compiles_cuda_with_cublas_here(tmp_path: Path) -> None:
    """Fetched once into the machine's cache (1.7 GB of packages, 4 GB unpacked), then an
    nvcc 12.4 that builds a CUDA program against cuBLAS for sm_90, with no GPU."""
    root = sourcebuild.provide(sourcebuild.for_cuda("12.4"), default_cache_dir())
    version = subprocess.run([str(root / "bin" / "nvcc"), "--version"], capture_output=True,
                             text=True, check=True).stdout
    assert "release 12.4" in version
    (tmp_path / "t.cu").write_text(CUBLAS)
    done = subprocess.run([str(root / "bin" / "nvcc"), "-arch=sm_90", "-o", "t", "t.cu",
                           "-lcublas"], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t").stat().st_size > 0


@pytest.mark.slow
def test_a_build_for_another_major_gets_debians_toolkit_and_one_architecture(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sourcebuild.harness_probe, "nvcc_version", lambda: "13.0")
    nvcc, variables = sourcebuild.compiler(spec("12.4"), default_cache_dir())
    assert nvcc == "12.4"
    assert Path(variables["CUDA_HOME"], "include", "cublas_v2.h").is_file()
    assert variables["PATH"].startswith(str(Path(variables["CUDA_HOME"], "bin")))
    assert (variables["NVTE_CUDA_ARCHS"], variables["TORCH_CUDA_ARCH_LIST"]) == ("90", "9.0")


def test_an_environment_built_against_a_fetched_toolkit_loads_its_own_cuda_libraries(
        tmp_path: Path) -> None:
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "nvidia"
    for name in ("cublas", "cudnn", "cuda_runtime"):
        (site / name / "lib").mkdir(parents=True)
    (site / "cuda_nvcc").mkdir()  # no lib/: nothing to load there
    got = sourcebuild.runtime_variables(tmp_path / "env", "/cache/toolkits/cuda", "/opt/x")
    assert got["CUDA_HOME"] == "/cache/toolkits/cuda"
    assert got["LD_LIBRARY_PATH"].split(":") == [
        str(site / "cublas" / "lib"), str(site / "cuda_runtime" / "lib"),
        str(site / "cudnn" / "lib"), "/opt/x"]  # the machine's path after the env's own
    # Any other environment: the machine's toolkit and driver stay in charge.
    assert sourcebuild.runtime_variables(tmp_path / "env", None, "/opt/x") == {}
    # Compiled elsewhere (a wheel folder's TE): the env's own libraries, the machine's toolkit.
    took = sourcebuild.runtime_variables(tmp_path / "env", None, "/opt/x", prebuilt=True)
    assert took == {"LD_LIBRARY_PATH": got["LD_LIBRARY_PATH"]}


def test_a_build_gets_the_environments_own_cudnn_and_nccl_headers(tmp_path: Path) -> None:
    """No toolkit brings cudnn.h or nccl.h (TE >= 2.8 includes it): the environment's own
    nvidia-cudnn-cu12 and nvidia-nccl-cu12 do."""
    subprocess.run(["uv", "venv", "-q", str(tmp_path / "env")], check=True)
    python = str(tmp_path / "env" / "bin" / "python")
    assert sourcebuild.header_variables(python) == {}  # neither installed: nothing to add
    (site,) = (tmp_path / "env" / "lib").glob("python*/site-packages")
    for lib in ("nccl", "cudnn", "cublas"):
        (site / "nvidia" / lib / "include").mkdir(parents=True)
    got = sourcebuild.header_variables(python)
    assert got["CPATH"].split(":") == [str(site / "nvidia" / "cudnn" / "include"),
                                      str(site / "nvidia" / "nccl" / "include")]
    assert got["CUDNN_PATH"] == str(site / "nvidia" / "cudnn")


def test_wheels_compiled_elsewhere_use_their_own_toolkit_only_for_another_major(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    nvidia = tmp_path / "lib" / "python3.11" / "site-packages" / "nvidia"
    nvidia.mkdir(parents=True)
    monkeypatch.setattr(sourcebuild.harness_probe, "nvcc_version", lambda: "13.0")
    assert sourcebuild.own_cuda_home(spec("12.4"), tmp_path) == str(nvidia)
    assert sourcebuild.own_cuda_home(spec("cpu"), tmp_path) is None
    monkeypatch.setattr(sourcebuild.harness_probe, "nvcc_version", lambda: "12.6")
    assert sourcebuild.own_cuda_home(spec("12.4"), tmp_path) is None

"""bench/gpu_host.sh rehearsed on the CPU, so that a lent GPU machine tests only the GPU.

`prepare` runs against a stand-in of the lent H100's `pip list --format=freeze`
(tests/data/gpu_host/h100-freeze.txt: the names its image holds, with the versions read there
where known) and must fit each part into the 64 MiB a device run carries. `run` then runs in a
network namespace with nothing but loopback, against a stand-in host: a Python 3.12 virtualenv
holding torch 2.11.0 and every package the overlays take from the host, at the freeze's
versions. Like the device's python3 (/opt/torch/.venv), that host is itself a virtualenv's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from harness.core.matrix import requirement_name
from harness.envs.overlay import added_by_overlay, read_packages
from harness.envs.preflight import DEFAULT_PLATFORM, _compile
from harness.envs.uv import uv_environ
from harness.matrix.load import load_matrix
from harness.matrix.sources import with_find_links
from tests.conftest import ROOT, record_lines

FREEZE = ROOT / "tests" / "data" / "gpu_host" / "h100-freeze.txt"
FORK = ROOT.parent / "shared" / "wheelhouse"  # the ktransformers fork's wheel (GitHub only)
LIMIT_MIB = 64
#: What the host must hold for the harness itself and the probes (the rest comes from .whl/).
HOST_OWN = ("torch", "numpy", "pyyaml", "packaging", "pandas", "rich", "pytest", "pip",
            "jinja2", "psutil", "filelock")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace"),
    pytest.mark.skipif(not (FORK / "SHA256SUMS").is_file(),
                       reason="needs ../shared/wheelhouse (the flashinfer fork's wheel)"),
]


def _python312() -> str:
    """A Python 3.12 interpreter itself (not a launcher such as pyenv's shim), or skip."""
    candidates = [*map(str, Path.home().glob(".pyenv/versions/3.12*/bin/python3.12")),
                  *filter(None, [shutil.which("python3.12")])]
    for candidate in candidates:
        proc = subprocess.run([candidate, "-c", "import sys; print(sys.executable)"],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            return proc.stdout.strip()
    pytest.skip("needs a Python 3.12 (the H100's python3 is 3.12)")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the tree, as the device gets it, with `prepare` run in it."""
    repo = tmp_path_factory.mktemp("gpu-host") / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    proc = subprocess.run(
        ["bash", "bench/gpu_host.sh", "prepare", str(FREEZE), "3.12", str(FORK)], cwd=repo,
        capture_output=True, text=True, timeout=1800, check=False,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                                   f"{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return repo, proc.stdout


def test_prepare_fits_each_part_into_a_device_carry(prepared: tuple[Path, str]) -> None:
    repo, out = prepared
    carries = {int(n): int(m) for n, m in re.findall(r"^part (\d): carry (\d+) MiB", out, re.M)}
    assert set(carries) == {1, 2}, out
    wheels = repo / ".whl"
    tree = sum((repo / f).stat().st_size for f in subprocess.run(
        ["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split())
    for part, said in carries.items():
        size = tree + sum(p.stat().st_size for d in ("harness", str(part))
                          for p in (wheels / d).iterdir())
        assert said == -(-size // 2**20) <= LIMIT_MIB, (part, said, size)
    names = {d: {requirement_name(p.name.split("-")[0]) for p in (wheels / d).glob("*.whl")}
             for d in ("1", "2", "harness")}
    assert {"mergekit", "transformers", "flashinfer-python"} <= names["1"], names
    assert {"transformer-lens", "transformers", "wandb", "typeguard"} <= names["2"], names
    # what the H100's python3 lacks of the harness's own dependencies, and nothing it holds
    assert names["harness"] == {"uv", "orjson", "msgspec"}, names
    held = set(read_packages(FREEZE))
    assert not (names["1"] | names["2"]) & {"torch", "triton", "numpy", "pyarrow", "scipy"}
    assert "0 pins without a wheel, 0 environments that do not resolve" in out, out
    assert held.isdisjoint(names["harness"])


@pytest.fixture(scope="module")
def stand_in_host(prepared: tuple[Path, str],
                  tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding, at the freeze's versions, whatever the overlays take from the host
    (resolved as `harness wheelhouse` resolves them) and what the harness needs."""
    repo, _ = prepared
    folder = tmp_path_factory.mktemp("host")
    freeze = read_packages(FREEZE)
    spec = with_find_links(load_matrix(repo / "matrices" / "gpu-host.yaml"), (FORK,))
    own = replace(spec.environments[0], name="host-own", requirements=HOST_OWN, builds=())
    taken: set[str] = set()
    for env in [*spec.environments, own]:
        pins = _compile(replace(env, python="3.12"),
                        cache_dir=folder / "cache", platform=DEFAULT_PLATFORM, base=freeze)
        taken |= set(pins) - set(added_by_overlay(pins, freeze))
    # what they depend on too (a base package stands in without its dependencies), each at
    # the freeze's version where it can be: uv prefers the versions of its output file
    wanted = folder / "requirements.in"
    names = {requirement_name(p) for p in taken} | set(HOST_OWN)
    wanted.write_text("\n".join(sorted(names)) + "\n")
    resolved = folder / "host.txt"
    resolved.write_text("".join(f"{n}=={v.split('+')[0]}\n" for n, v in freeze.items()))
    venv = folder / "venv"
    uv = [sys.executable, "-m", "uv"]
    for args in (["pip", "compile", "-q", str(wanted), "--python-version", "3.12",
                  "-o", str(resolved)],
                 ["venv", "-q", "--python", _python312(), str(venv)],
                 ["pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-r",
                  str(resolved)]):
        proc = subprocess.run([*uv, *args], env=uv_environ(), capture_output=True, text=True,
                              timeout=3600, check=False)
        assert proc.returncode == 0, proc.stderr
    return venv


PART_ENVS = {1: {"host-probes", "host-mergekit", "host-ktransformers-flashinfer"},
              2: {f"host-transformerlens-{v}" for v in ("1.12.1", "1.13.0", "1.14.0")}}


def _run_part(repo: Path, host: Path, part: int, tmp_path: Path) -> tuple[str, Path]:
    """`run PART` in a network namespace with nothing but loopback: its output, its run."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "HARNESS_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": f"{host / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
           "UV_CACHE_DIR": str(tmp_path / "uv-cache")}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "HARNESS_HOST_PYTHON"):
        env.pop(name, None)
    proc = subprocess.run(["unshare", "--net", "bash", "bench/gpu_host.sh", "run", str(part)],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=1500,
                          check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert re.search(r"^GPUs:\s+none$", text, re.M), text  # doctor: this machine has none
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"])
            if any(str(repo) in arg for arg in p.info["cmdline"] or ())]
    assert not left, left  # nothing of the run outlives it
    [run] = (out / "reports" / "runs").iterdir()
    cells = {c["cell_id"]: c for c in record_lines(run)}
    assert {c["environment"] for c in cells.values()} == PART_ENVS[part]
    for cell in cells.values():
        # built offline from .whl/PART over the stand-in host's own torch: no ERROR
        assert cell["outcome"] != "ERROR", cell
        found = cell["fingerprint"]  # the store resolves its shared.jsonl reference
        assert found["key"]["torch"] == "2.11.0", found
        assert found["overlay"]["base"] == str(host / "bin" / "python3"), found
        # the script's line for the cell
        assert re.search(rf"^{cell['cell_id']} {cell['outcome']}\b", text, re.M), cell
    assert (run / "report" / "compat.md").is_file()
    return text, run


def _outcomes(run: Path) -> dict[str, str]:
    cells = {c["cell_id"]: c for c in record_lines(run)}
    return {f"{c['case_id']}::{c['variant']}": c["outcome"] for c in cells.values()}


def test_part_1_runs_offline_on_a_stand_in_host_leaving_only_the_gpu_untested(
        prepared: tuple[Path, str], stand_in_host: Path, tmp_path: Path) -> None:
    _, run = _run_part(prepared[0], stand_in_host, 1, tmp_path)
    outcomes = _outcomes(run)
    # what a CPU can run of failures.md §2 and §4 on the host's torch (nvcc 13 here and there)
    assert outcomes["ktransformers_flashinfer::compile[fa3]"] == "REPRODUCED"
    assert outcomes["ktransformers_flashinfer::compile[fa2]"] == "PASS"
    assert outcomes["mergekit_fp16::workaround[float32]"] == "PASS"
    for name in ("mergekit_fp16::workaround_cuda", "probes::fp8_scaled_mm", "probes::bf16_cuda",
                 "ktransformers_flashinfer::end_to_end[fa2]"):
        assert outcomes[name] == "SKIP", name  # what only the GPU can show


def test_part_2_runs_offline_on_a_stand_in_host_leaving_only_the_gpu_untested(
        prepared: tuple[Path, str], stand_in_host: Path, tmp_path: Path) -> None:
    _, run = _run_part(prepared[0], stand_in_host, 2, tmp_path)
    cells = {c["cell_id"]: c for c in record_lines(run)}
    # TransformerLens imported in all three overlays (no ERROR); its case is the GPU's alone
    assert len(cells) == 9
    assert {(c["outcome"], c["reason"]) for c in cells.values()} == {
        ("SKIP", "needs a CUDA GPU; none is visible to this cell")}

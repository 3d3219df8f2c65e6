"""Wheels built once (``harness envs build --into DIR``) and taken by environments whose key
matches: a real sdist with a C extension, compiled by a real compiler on the builder, installed
with no compiler and no network on the "second machine"."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from harness.envs.wheelkey import WheelKey
from tests.conftest import ROOT, served
from tests.packages import make_sdist, make_wheel

KEY = WheelKey(dist="transformer-engine-torch", version="1.13.0", torch="2.4.1", cuda="12.4",
               python="3.11", archs=("90",), settings=(("NVTE_FRAMEWORK", "pytorch"),))


def test_a_wheel_built_for_another_torch_is_refused_in_one_line() -> None:
    assert KEY.refusal(replace(KEY, torch="2.5.1", version="", archs=()), frozenset()) == (
        "built for torch 2.4.1, this environment has torch 2.5.1")
    assert KEY.refusal(replace(KEY, archs=()), frozenset({"90"})) is None
    assert KEY.refusal(KEY, frozenset({"80", "90"})) == (
        "built for sm_90, not for this machine's sm_80")
    assert KEY.refusal(replace(KEY, settings=()), frozenset()) == (
        "built with NVTE_FRAMEWORK=pytorch, this environment builds with no settings")
    assert KEY.folder != replace(KEY, archs=("80", "90")).folder


# setup.py imports torch (as TE's does), bakes its version in and compiles a C extension.
SETUP = """\
import pathlib
import torch
from setuptools import Extension, setup
pathlib.Path("tinyext/_built.py").write_text(f"TORCH = {torch.__version__!r}\\n")
setup(name="tinyext", version="1.0", packages=["tinyext"],
      ext_modules=[Extension("tinyext._native", ["native.c"])])
"""
NATIVE = """\
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&m); }
"""
MATRIX = """\
version: 1
cases_dir: {cases}
build:
  tinyext:
    isolation: false
    requires: [torch, setuptools]
environments:
  tiny-torch241:
    hardware: [cpu]
    python: "3.11"
    packages: ["torch==2.4.1", "tinyext==1.0"]
    cases: [probes]
  tiny-torch251:
    hardware: [cpu]
    python: "3.11"
    packages: ["torch==2.5.1", "tinyext==1.0"]
    cases: [probes]
"""


def compiler_shims(folder: Path, log: Path) -> dict[str, str]:
    """PATH with gcc, cc and nvcc wrappers that write each call to ``log`` first (but a
    ``--version``: the machine's probe asks nvcc that)."""
    folder.mkdir()
    for name in ("gcc", "cc", "g++", "c++", "nvcc"):
        real = shutil.which(name)
        shim = folder / name
        shim.write_text(f"#!/bin/sh\n[ \"$*\" = --version ] || echo {name} \"$@\" >> {log}\n"
                        + (f"exec {real} \"$@\"\n" if real else "exit 1\n"))
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def _harness(*args: str, cache: Path, env: dict[str, str], wrap: tuple[str, ...] = ()
             ) -> subprocess.CompletedProcess[str]:
    variables = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(cache),
                 "UV_CACHE_DIR": str(cache / "uv-cache"), **env}
    return subprocess.run([*wrap, sys.executable, "-m", "harness", *args], env=variables,
                          capture_output=True, text=True, check=False, timeout=1200)


def _provenance(cache: Path, name: str) -> list[str]:
    (marker,) = (cache / "uv").glob(f"{name}-*/harness-env.json")
    return list(json.loads(marker.read_text())["fingerprint"]["provenance"])


def tiny_index(folder: Path) -> Path:
    """A fake torch in two versions, the tinyext sdist, and the wheels its builds need."""
    folder.mkdir()
    for version in ("2.4.1", "2.5.1"):
        make_wheel(folder, "torch", version, {  # what the fingerprint asks of a torch
            "torch/__init__.py": f"__version__ = {version!r}\nfrom . import cuda, version\n",
            "torch/version.py": "cuda = None\n",
            "torch/cuda.py": "def is_available():\n    return False\n"})
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--dest", str(folder),
                    "--only-binary=:all:", "setuptools", "pip", "pytest"], check=True)
    make_sdist(folder, "tinyext", "1.0", {"setup.py": SETUP, "native.c": NATIVE,
                                          "tinyext/__init__.py": "from . import _native\n"})
    return folder


@pytest.mark.slow
def test_wheels_built_once_install_on_a_machine_without_compiler_or_network(
        tmp_path: Path) -> None:
    index = tiny_index(tmp_path / "index")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.format(cases=ROOT / "cases"))
    wheels = tmp_path / "wheels"
    m = ("-m", str(matrix), "--offline")  # the fake torch, never PyPI's

    # The builder: compiles, files the wheel under its key; a second run keeps it.
    log = tmp_path / "builder.log"
    builder = {"env": compiler_shims(tmp_path / "shims", log), "cache": tmp_path / "builder"}
    done = _harness("envs", "build", "--into", str(wheels), *m, "--env", "tiny-torch241",
                    "--find-links", str(index), **builder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 wheels built, 0 already there" in done.stdout, done.stdout
    assert "gcc" in log.read_text()  # the wrappers do see a real build
    (manifest,) = wheels.glob("tinyext-1.0-*/wheel-key.json")
    assert json.loads(manifest.read_text())["key"]["torch"] == "2.4.1"
    again = _harness("envs", "build", "--into", str(wheels), *m, "--env", "tiny-torch241",
                     "--find-links", str(index), **builder)
    assert "0 wheels built, 1 already there" in again.stdout, again.stdout + again.stderr
    house = _harness("wheelhouse", str(wheels), *m, "--env", "tiny-torch241",
                     "--find-links", str(index), **builder)
    assert house.returncode == 0 and "0 pins without a wheel" in house.stdout, house.stdout

    # The runner: a fresh cache, no route out, every compiler watched.
    quiet = tmp_path / "runner.log"
    runner = {"env": compiler_shims(tmp_path / "runner-shims", quiet), "cache": tmp_path / "runner"}
    took = _harness("envs", "check", "--build", *m, "--env", "tiny-torch241",
                    "--find-links", str(wheels), wrap=("unshare", "-n"), **runner)
    assert took.returncode == 0, took.stdout + took.stderr
    assert not quiet.exists(), quiet.read_text()
    (said,) = _provenance(runner["cache"], "tiny-torch241")
    assert said == f"tinyext 1.0 from the wheel folder (key {manifest.parent.name})"
    # The same folder served over http(s): its key folders are read from the URL.
    with served(wheels) as url:
        remote = _harness("envs", "check", "--build", *m, "--env", "tiny-torch241",
                          "--find-links", url, "--find-links", str(index), env=runner["env"],
                          cache=tmp_path / "remote")
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert not quiet.exists(), quiet.read_text()
    assert _provenance(tmp_path / "remote", "tiny-torch241") == [said]

    # Another torch: the wheel is refused in one line, and the package is built here.
    other = _harness("envs", "check", "--build", *m, "--env", "tiny-torch251",
                     "--find-links", str(wheels), "--find-links", str(index), **runner)
    assert other.returncode == 0, other.stdout + other.stderr
    assert _provenance(runner["cache"], "tiny-torch251") == [
        f"tinyext 1.0 built here; refused {manifest.parent.name}: built for torch 2.4.1, "
        "this environment has torch 2.5.1"]
    assert "gcc" in quiet.read_text()
    assert ("environment tiny-torch251: no wheel of the wheel folder fits (built for torch "
            "2.4.1, this environment has torch 2.5.1): building here") in other.stderr
    # A wheel folder without that key (a cache missed): said as well, never silent.
    empty = tmp_path / "empty"
    empty.mkdir()
    missed = _harness("envs", "check", "--build", *m, "--env", "tiny-torch251", "--find-links",
                      str(empty), "--find-links", str(index), env=runner["env"],
                      cache=tmp_path / "runner2")
    assert missed.returncode == 0, missed.stdout + missed.stderr
    assert ("environment tiny-torch251: no wheel of the wheel folder fits (none for its key): "
            "building here") in missed.stderr
    # A wheel that fits but does not install (a torn copy): uv's reason, then built here.
    torn = tmp_path / "torn"
    shutil.copytree(wheels, torn)
    (wheel,) = torn.glob("tinyext-1.0-*/*.whl")
    wheel.write_bytes(wheel.read_bytes()[:100])
    broke = _harness("--reports", str(tmp_path / "r"), "run", *m, "--only", "env=tiny-torch241",
                     "--no-report", "--find-links", str(torn), "--find-links", str(index),
                     env=runner["env"], cache=tmp_path / "runner3")
    assert "environments: 1 built" in broke.stderr + broke.stdout, broke.stdout + broke.stderr
    assert ("environment tiny-torch241: no wheel of the wheel folder fits (installing from it "
            "failed: ") in broke.stderr, broke.stderr
    assert _provenance(tmp_path / "runner3", "tiny-torch241") == ["tinyext 1.0 built here"]


@pytest.mark.slow
def test_each_wheel_is_compiled_against_its_own_environments_torch(tmp_path: Path) -> None:
    """pip keeps a wheel it built from an sdist and serves it again for the same sdist: the
    torch 2.5.1 environment would get the wheel compiled against torch 2.4.1."""
    index = tiny_index(tmp_path / "index")
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX.format(cases=ROOT / "cases"))
    wheels = tmp_path / "wheels"
    done = _harness("envs", "build", "--into", str(wheels), "-m", str(matrix), "--offline",
                    "--find-links", str(index), cache=tmp_path / "builder",
                    env={"PIP_CACHE_DIR": str(tmp_path / "pip-cache")})
    assert done.returncode == 0 and "2 wheels built" in done.stdout, done.stdout + done.stderr
    baked = {}
    for manifest in wheels.glob("tinyext-1.0-*/wheel-key.json"):
        data = json.loads(manifest.read_text())
        with zipfile.ZipFile(manifest.parent / data["wheel"]) as wheel:
            baked[data["key"]["torch"]] = wheel.read("tinyext/_built.py").decode().strip()
    assert baked == {"2.4.1": "TORCH = '2.4.1'", "2.5.1": "TORCH = '2.5.1'"}


FORK_MATRIX = """\
version: 1
cases_dir: {cases}
environments:
  fork:
    hardware: [cpu]
    python: "3.11"
    packages: ["tinyfork @ git+file://{repo}@{commit}"]
    cases: [probes]
"""


@pytest.mark.slow
def test_a_fork_named_by_git_url_is_built_once_and_never_cloned_again(tmp_path: Path) -> None:
    """As the ktransformers flashinfer fork: a package on a git host only, built into the
    wheel folder by the builder; the runner, which cannot reach that host, installs it."""
    index = tiny_index(tmp_path / "index")
    repo = tmp_path / "repo"
    (repo / "tinyfork").mkdir(parents=True)
    (repo / "tinyfork" / "__init__.py").write_text("FORKED = True\n")
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "tinyfork"\nversion = "0.3.1"\n[build-system]\n'
        'requires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n')
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "fork"], check=True)
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(FORK_MATRIX.format(cases=ROOT / "cases", repo=repo, commit=commit))
    wheels = tmp_path / "wheels"
    m = ("-m", str(matrix), "--offline", "--find-links", str(index))

    done = _harness("envs", "build", "--into", str(wheels), *m, env={},
                    cache=tmp_path / "builder")
    assert done.returncode == 0 and "1 wheels built" in done.stdout, done.stdout + done.stderr
    (manifest,) = wheels.glob("tinyfork-0.3.1-*/wheel-key.json")
    assert json.loads(manifest.read_text())["source"] == f"git+file://{repo}@{commit}"

    shutil.rmtree(repo)  # the git host is out of reach from here on
    runner = tmp_path / "runner"
    took = _harness("envs", "check", "--build", *m, "--find-links", str(wheels), env={},
                    cache=runner, wrap=("unshare", "-n"))
    assert took.returncode == 0, took.stdout + took.stderr
    assert _provenance(runner, "fork") == [
        f"tinyfork 0.3.1 from the wheel folder (key {manifest.parent.name})"]
    with served(wheels) as url:
        remote = _harness("envs", "check", "--build", *m, "--find-links", url, env={},
                          cache=tmp_path / "remote")
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert _provenance(tmp_path / "remote", "fork") == _provenance(runner, "fork")

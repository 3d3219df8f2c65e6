"""The realize lifecycle every backend shares, and backends loaded only when named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.backends import REGISTRY
from harness.core.errors import DriftError, UsageError
from harness.core.matrix import EnvSpec
from harness.envs import backend_class, get_backend
from harness.envs.base import Backend, Environment, LaunchRequest, Process
from tests.conftest import ROOT


class Recording(Backend):
    """A backend whose steps only say they ran (the template's logic is what is tested)."""

    name = "recording"

    def __init__(self, cache_dir: Path, *, there: bool, torch: str = "2.5.1") -> None:
        super().__init__(cache_dir)
        self.there, self.torch, self.steps = there, torch, []  # type: ignore[var-annotated]

    def _locate(self, spec: EnvSpec) -> str:
        self.steps.append("locate")
        return f"/envs/{spec.name}"

    def _build_dir(self, place: Any) -> Path:
        self.steps.append("lock")
        return self.cache_dir / "env"

    def _find(self, spec: EnvSpec, place: Any) -> Environment | None:
        self.steps.append("find")
        return self._found(spec, place, built=False) if self.there else None

    def _build(self, spec: EnvSpec, place: Any, handover: Any = None) -> Environment:
        self.steps.append("build")
        return self._found(spec, place, built=True)

    def _found(self, spec: EnvSpec, place: str, *, built: bool) -> Environment:
        return Environment(spec=spec, location=place, python=f"{place}/bin/python",
                           built=built,
                           fingerprint={"python": "3.11.7", "packages": {"torch": self.torch}})

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        raise NotImplementedError


def spec(**extra: Any) -> EnvSpec:
    return EnvSpec(name="e", origin="environments.e", values=(), backend="uv", python="3.11",
                   requirements=("torch==2.5.1",), pins=(("torch", "2.5.1"),), **extra)


def test_a_missing_environment_is_built_under_its_lock(tmp_path: Path) -> None:
    backend = Recording(tmp_path, there=False)
    env = backend.realize(spec())
    assert backend.steps == ["locate", "lock", "find", "build"]
    assert (env.location, env.python, env.built) == ("/envs/e", "/envs/e/bin/python", True)
    assert (tmp_path / "env.lock").exists() and not (tmp_path / "env.lock.holder").exists()


def test_one_that_is_there_is_reused() -> None:
    backend = Recording(Path("/tmp"), there=True)
    assert backend.realize(spec()).built is False
    assert "build" not in backend.steps


@pytest.mark.parametrize("there", [True, False])
def test_drift_is_checked_on_every_realize(tmp_path: Path, there: bool) -> None:
    backend = Recording(tmp_path, there=there, torch="2.6.0")  # not the 2.5.1 asked for
    with pytest.raises(DriftError):
        backend.realize(spec())


def test_a_bad_backend_name_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown backend 'conda'; valid: docker, host, uv"):
        get_backend("conda", tmp_path)
    assert {name: backend_class(name).name for name in REGISTRY} == {
        "uv": "uv", "host": "host", "docker": "docker"}


def test_importing_the_envs_package_imports_no_backend() -> None:
    """The Docker backend and its image builder load when a matrix names docker."""
    code = ("import sys, harness.envs, harness.run.cell; "
            "print(sorted(m for m in sys.modules if m.startswith('harness.envs.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    loaded = eval(done.stdout)  # a printed list of module names
    assert "harness.envs.docker" not in loaded and "harness.envs.images" not in loaded
    assert "harness.envs.base" in loaded

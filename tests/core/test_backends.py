"""One backend registry: a name registered there is accepted and listed everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import backends
from harness.core.backends import BackendInfo
from harness.core.errors import SpecError, UsageError
from harness.envs import backend_class, get_backend
from harness.envs.host import HostBackend
from harness.envs.preflight import resolve_env
from harness.matrix.load import parse_matrix
from harness.matrix.sources import with_find_links
from tests.packages import make_wheel

MATRIX = """\
version: 1
suites: {wide: {pyargs: mylib.tests, workers: 2}}
environments:
  boxed:
    backend: conda
    packages: ["flashinfer-python @ git+https://github.com/o/fork@fd94393"]
    suites: [wide]
"""


@pytest.fixture
def conda(monkeypatch: pytest.MonkeyPatch) -> BackendInfo:
    """A fourth backend, registered for this test only (its class: the host's)."""
    added = BackendInfo(name="conda", where="harness.envs.host:HostBackend", installs=True,
                        local=True)
    monkeypatch.setitem(backends.REGISTRY, "conda", added)
    return added


@pytest.mark.usefixtures("conda")
def test_a_registered_name_is_accepted_listed_and_found(tmp_path: Path) -> None:
    spec = parse_matrix(MATRIX, file="matrix.yaml", base=tmp_path)
    (env,) = spec.environments
    assert env.backend == "conda"
    assert "pytest-xdist" in " ".join(env.requirements)  # it installs, so it gets xdist
    with pytest.raises(SpecError, match=r"unknown backend 'mamba'; valid: conda, docker, host, "
                                        r"uv$"):
        parse_matrix(MATRIX.replace("conda", "mamba"), file="matrix.yaml", base=tmp_path)
    with pytest.raises(UsageError, match=r"valid: conda, docker, host, uv$"):
        get_backend("mamba", tmp_path)
    assert backends.backend_names() == ("conda", "docker", "host", "uv")
    assert backend_class("conda") is HostBackend
    assert isinstance(get_backend("conda", tmp_path), HostBackend)
    # local: --find-links folders reach it, as they reach uv's.
    make_wheel(tmp_path, "flashinfer-python", "0.2.3", {"flashinfer/__init__.py": ""})
    (swapped,) = with_find_links(spec, (tmp_path,)).environments
    assert swapped.find_links == (str(tmp_path),)


def test_a_backend_that_installs_nothing_is_not_resolved_nor_given_xdist(
        conda: BackendInfo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(backends.REGISTRY, "conda", BackendInfo(name="conda", where=conda.where))
    (env,) = parse_matrix(MATRIX, file="matrix.yaml", base=tmp_path).environments
    assert "pytest-xdist" not in " ".join(env.requirements)
    check = resolve_env(env, cache_dir=tmp_path, platform="x86_64-manylinux_2_28")
    assert (check.resolves, check.reason) == ("-", "the conda backend installs nothing")


def test_only_a_backend_that_overlays_takes_a_base(tmp_path: Path) -> None:
    text = MATRIX.replace("backend: conda", "backend: docker\n    base: host")
    with pytest.raises(SpecError, match=r"needs backend uv, not docker$"):
        parse_matrix(text, file="matrix.yaml", base=tmp_path)


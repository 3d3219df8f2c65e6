"""Drift: what an environment holds against every requirement it was asked for."""

from __future__ import annotations

import pytest

from harness.core.matrix import EnvSpec
from harness.envs.base import drift
from harness.matrix.load import requirement_for


def env(pins: dict[str, str], packages: tuple[str, ...] = ()) -> EnvSpec:
    items = tuple(pins.items())
    return EnvSpec(name="e", origin="t", values=(), backend="uv", python="3.11",
                   requirements=tuple(requirement_for(d, v) for d, v in items) + packages,
                   pins=items)


def fingerprint(**packages: str) -> dict[str, object]:
    # As harness_fingerprint writes it: names normalized with '-'.
    return {"python": "3.11.7", "packages": packages}


def test_a_dotted_name_matches_its_normalized_installed_name() -> None:
    assert drift(env({"ruamel.yaml": "0.18.6"}), fingerprint(**{"ruamel-yaml": "0.18.6"})) == []


@pytest.mark.parametrize(("pin", "installed", "problem"), [
    ("<2", "1.26.4", None),
    ("<2", "2.1.0", "asked numpy<2, got numpy 2.1.0"),
    (">=1.24,<1.27", "1.23.5", "asked numpy>=1.24,<1.27, got numpy 1.23.5"),
    ("*", "2.1.0", None),
    ("1.26.4", "1.26.4", None),
])
def test_specifier_pins_are_checked(pin: str, installed: str, problem: str | None) -> None:
    got = drift(env({"numpy": pin}), fingerprint(numpy=installed))
    assert got == ([problem] if problem else [])


def test_a_local_build_satisfies_its_public_version() -> None:
    assert drift(env({"torch": "2.1.2"}), fingerprint(torch="2.1.2+cu121")) == []


def test_packages_entries_are_checked_too() -> None:
    spec = env({}, packages=("pyarrow<20", "typeguard"))
    assert drift(spec, fingerprint(pyarrow="21.0.0", typeguard="4.4.1")) == [
        "asked pyarrow<20, got pyarrow 21.0.0"]
    assert drift(spec, fingerprint(pyarrow="19.0.1")) == [
        "asked typeguard, but typeguard is not installed"]


def test_a_url_requirement_needs_only_the_distribution() -> None:
    spec = env({"flashinfer-python": "git+https://github.com/kvcache-ai/flashinfer@abc"})
    assert drift(spec, fingerprint(**{"flashinfer-python": "0.2.3"})) == []
    (problem,) = drift(spec, fingerprint())
    assert problem.endswith("but flashinfer-python is not installed")

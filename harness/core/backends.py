"""The environment backends a matrix may name: every list of backend names is read from here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class BackendInfo:
    """One backend: where its class lives (imported by harness.envs when first asked for), and
    what the stages other than envs need to know of it."""

    name: str
    where: str  # "module:Class"
    installs: bool = False  # installs the requirements with uv: preflight resolves them offline
    local: bool = False  # uv runs on this machine, so --find-links folders are visible to it
    overlays: bool = False  # may build on another interpreter's packages (``base:``)


REGISTRY: dict[str, BackendInfo] = {b.name: b for b in (
    BackendInfo(name="uv", where="harness.envs.uv:UvBackend", installs=True, local=True,
                overlays=True),
    BackendInfo(name="docker", where="harness.envs.docker:DockerBackend", installs=True),
    BackendInfo(name="host", where="harness.envs.host:HostBackend"),
)}
DEFAULT = "uv"


def backend_names() -> tuple[str, ...]:
    """Every registered name, sorted: what error messages list as valid."""
    return tuple(sorted(REGISTRY))

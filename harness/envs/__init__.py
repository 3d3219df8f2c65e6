"""Environment backends: a plain mapping of name -> class."""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UsageError
from harness.envs.base import Backend, Environment, LaunchRequest, Process
from harness.envs.docker import DockerBackend
from harness.envs.host import HostBackend
from harness.envs.uv import UvBackend

BACKENDS: dict[str, type[Backend]] = {
    "uv": UvBackend, "host": HostBackend, "docker": DockerBackend}


def get_backend(name: str, cache_dir: Path) -> Backend:
    try:
        cls = BACKENDS[name]
    except KeyError:
        raise UsageError(f"unknown backend {name!r}; valid: " + ", ".join(sorted(BACKENDS))
                         ) from None
    return cls(cache_dir)


__all__ = ["BACKENDS", "Backend", "Environment", "LaunchRequest", "Process", "default_cache_dir",
           "get_backend"]

"""Environment backends: a plain mapping of name -> class."""

from __future__ import annotations

import os
from pathlib import Path

from harness.envs.base import Backend, Environment, LaunchRequest, Process
from harness.envs.docker import DockerBackend
from harness.envs.host import HostBackend
from harness.envs.uv import UvBackend
from harness.errors import UsageError

BACKENDS: dict[str, type[Backend]] = {
    "uv": UvBackend, "host": HostBackend, "docker": DockerBackend}


def default_cache_dir() -> Path:
    """Where environments, images' logs and build caches live on this machine."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ml-compat-harness"


def get_backend(name: str, cache_dir: Path) -> Backend:
    try:
        cls = BACKENDS[name]
    except KeyError:
        raise UsageError(f"unknown backend {name!r}; valid: " + ", ".join(sorted(BACKENDS))
                         ) from None
    return cls(cache_dir)


__all__ = ["BACKENDS", "Backend", "Environment", "LaunchRequest", "Process", "default_cache_dir",
           "get_backend"]

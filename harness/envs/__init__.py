"""Environment backends: name -> class (``harness.core.backends``), each imported when first
asked for (a run of uv environments never imports Docker's)."""

from __future__ import annotations

import importlib
from pathlib import Path

from harness.core.backends import REGISTRY, backend_names
from harness.core.errors import UsageError
from harness.envs.base import Backend, Environment, LaunchRequest, Process, Realizing


def backend_class(name: str) -> type[Backend]:
    module, _, cls = REGISTRY[name].where.partition(":")
    found: type[Backend] = getattr(importlib.import_module(module), cls)
    return found


def get_backend(name: str, cache_dir: Path) -> Backend:
    if name not in REGISTRY:
        raise UsageError(f"unknown backend {name!r}; valid: " + ", ".join(backend_names()))
    return backend_class(name)(cache_dir)


__all__ = ["Backend", "Environment", "LaunchRequest", "Process", "Realizing", "backend_class",
           "get_backend"]

"""Environment backends: name -> class (``harness.core.backends``), each imported when first
asked for (a run of uv environments never imports Docker's)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from pathlib import Path

from harness.core.backends import REGISTRY, backend_names
from harness.core.errors import UsageError
from harness.envs.base import Backend, Environment, LaunchRequest, Process, Realizing


class _Backends(Mapping[str, type[Backend]]):
    def __getitem__(self, name: str) -> type[Backend]:
        module, _, cls = REGISTRY[name].where.partition(":")
        found: type[Backend] = getattr(importlib.import_module(module), cls)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


BACKENDS: Mapping[str, type[Backend]] = _Backends()


def get_backend(name: str, cache_dir: Path) -> Backend:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; valid: " + ", ".join(backend_names()))
    return BACKENDS[name](cache_dir)


__all__ = ["BACKENDS", "Backend", "Environment", "LaunchRequest", "Process", "Realizing",
           "get_backend"]

"""Where the harness keeps things on a machine, decided once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: The stdlib-only files put on a cell's ``PYTHONPATH`` (the pytest plugin, the probes).
INENV_DIR = Path(__file__).resolve().parent.parent / "inenv"


def default_cache_dir() -> Path:
    """Where environments, images' logs and build caches live on this machine."""
    if os.environ.get("HARNESS_CACHE_DIR"):
        return Path(os.environ["HARNESS_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ml-compat-harness"


def uv_binary() -> str | None:
    """The uv environments are built with: on PATH, else the uv package's (beside this Python,
    in a venv not activated); None where there is none."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # the uv package: a dependency, imported where used

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):  # no package, or a package without its binary
        return None

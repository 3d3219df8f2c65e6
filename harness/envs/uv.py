"""uv virtualenvs: one per distinct environment, keyed by content, built with uv's shared cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from harness.envs.base import (
    Backend,
    Environment,
    LaunchRequest,
    Process,
    check_drift,
    launch_local,
    locked,
    read_fingerprint,
)
from harness.errors import EnvBuildError
from harness.spec import EnvSpec

MARKER = "harness-env.json"
PYTEST_REQUIREMENT = "pytest>=7"


class UvBackend(Backend):
    name = "uv"

    @property
    def root(self) -> Path:
        return self.cache_dir / "uv"

    def path_for(self, spec: EnvSpec) -> Path:
        slug = re.sub(r"[^A-Za-z0-9.]+", "-", spec.name).strip("-")[:60]
        return self.root / f"{slug}-{spec.key}"

    def realize(self, spec: EnvSpec) -> Environment:
        path = self.path_for(spec)
        self.root.mkdir(parents=True, exist_ok=True)
        with locked(path.with_name(path.name + ".lock")):
            marker = _read_marker(path)
            built = marker is None
            if marker is None:
                marker = self._build(spec, path)
        # Drift is judged on every realize: the spec's expectations (cuda) are not in the key.
        check_drift(spec, marker["fingerprint"])
        return Environment(spec=spec, location=str(path), python=str(path / "bin" / "python"),
                           fingerprint=marker["fingerprint"], built=built)

    def _build(self, spec: EnvSpec, path: Path) -> dict[str, Any]:
        # The marker is written last: a venv without one is half-built and is rebuilt.
        shutil.rmtree(path, ignore_errors=True)
        started = time.time()
        _uv(["venv", "--quiet", "--python", spec.python, str(path)], spec)
        args = ["pip", "install", "--python", str(path / "bin" / "python"),
                *index_args(spec.index_urls), *spec.requirements, PYTEST_REQUIREMENT]
        _uv(args, spec)
        fingerprint = read_fingerprint(str(path / "bin" / "python"))
        marker: dict[str, Any] = {
            "key": spec.key, "name": spec.name, "requirements": list(spec.requirements),
            "built_at": started, "build_seconds": round(time.time() - started, 1),
            "fingerprint": fingerprint,
        }
        tmp = path / (MARKER + ".tmp")
        tmp.write_text(json.dumps(marker, indent=1))
        tmp.replace(path / MARKER)
        return marker

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        return launch_local(env.python, request)

    def remove(self, env: Environment) -> None:
        shutil.rmtree(env.location, ignore_errors=True)

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for marker_path in sorted(self.root.glob(f"*/{MARKER}")):
            marker = json.loads(marker_path.read_text())
            out.append({"backend": self.name, "name": marker["name"], "key": marker["key"],
                        "location": str(marker_path.parent), "built_at": marker["built_at"]})
        return out


def _read_marker(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data


def index_args(urls: tuple[str, ...]) -> list[str]:
    # A CUDA index (download.pytorch.org/whl/cu121) sits beside PyPI; unsafe-best-match lets
    # uv take the cu121 torch from there and everything else from PyPI, as pip would.
    args = []
    for url in urls:
        args += ["--extra-index-url", url]
    if urls:
        args += ["--index-strategy", "unsafe-best-match"]
    return args


def uv_environ() -> dict[str, str]:
    env = dict(os.environ)
    # Never download interpreters (no route to them on many runners); use what is installed.
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    # Behind a TLS-intercepting proxy the CA is in the system store, not in uv's bundled roots.
    env.setdefault("UV_NATIVE_TLS", "1")
    env.pop("VIRTUAL_ENV", None)
    return env


def _uv(args: list[str], spec: EnvSpec) -> None:
    uv = shutil.which("uv") or _bundled_uv()
    try:
        proc = subprocess.run([uv, *args], capture_output=True, text=True, env=uv_environ(),
                              check=False, timeout=3600)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvBuildError(f"uv failed to start: {exc}") from exc
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise EnvBuildError(f"uv {args[0]} failed for {spec.name}: " + "\n".join(lines[-6:]))


def _bundled_uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        raise EnvBuildError("uv is not installed (pip install uv)") from None
    return str(find_uv_bin())

"""Preflight: prove a matrix's environments on any machine, GPU or not.

For every environment, whatever hardware it targets: does it **resolve** for its own Python
and platform (``uv pip compile --python-version --python-platform``, nothing installed), and,
with ``build=True``, does it **build** here for real and do the packages it names **import**?
A CUDA torch installs and imports without a GPU, so most of a GPU matrix can be proven on a
CPU machine; what cannot (a host this machine cannot reach, a build that needs cuDNN) says so.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.envs import Backend
from harness.envs.base import locked
from harness.envs.uv import PYTEST_REQUIREMENT, _uv_binary, install_args, uv_environ
from harness.errors import EnvImportError, HarnessError
from harness.spec import BuildSetting, EnvSpec

#: The platform GPU runners are: glibc x86-64 (manylinux_2_28 covers current torch wheels).
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"
#: Installers that resolve with uv from a requirement list; the host installs nothing.
RESOLVABLE = ("uv", "docker")
_NETWORK = re.compile(r"dns error|Could not resolve host|failed to lookup address|"
                      r"Connection refused|connection timed out|Network is unreachable|"
                      r"error sending request", re.IGNORECASE)
_HOST = re.compile(r"https?://([A-Za-z0-9.-]+)")


@dataclass(frozen=True, kw_only=True)
class EnvCheck:
    """One environment's preflight. Each stage is yes, no, "-" (not tried), or for resolves
    "unreachable": the environment needs a host this machine cannot reach (GitHub)."""

    name: str
    backend: str
    resolves: str
    builds: str = "-"
    imports: str = "-"
    packages: int = 0  # how many distributions the resolution holds
    seconds: float = 0.0
    reason: str = ""  # the first lines of why a stage said no
    unreachable: str | None = None  # the host this machine could not reach, if that was why

    @property
    def ok(self) -> bool:
        return "no" not in (self.resolves, self.builds, self.imports)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_environments(envs: Sequence[EnvSpec], *, backends: dict[str, Backend],
                       cache_dir: Path, build: bool = False, platform: str = DEFAULT_PLATFORM,
                       jobs: int = 4, on_done: Callable[[EnvCheck], None] = lambda _: None
                       ) -> list[EnvCheck]:
    """Resolve every environment (``jobs`` at a time), then build those that resolved, one
    at a time (builds are heavy; uv parallelises inside each)."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        resolved = list(pool.map(lambda e: resolve_env(e, cache_dir=cache_dir,
                                                       platform=platform), envs))
    out = []
    for env, check in zip(envs, resolved, strict=True):
        if build and check.resolves in ("yes", "-"):
            check = build_env(env, backends[env.backend], check)
        on_done(check)
        out.append(check)
    return out


def resolve_env(env: EnvSpec, *, cache_dir: Path, platform: str) -> EnvCheck:
    started = time.monotonic()
    if env.backend not in RESOLVABLE:
        return EnvCheck(name=env.name, backend=env.backend, resolves="-",
                        reason="the host backend installs nothing")
    with tempfile.TemporaryDirectory(prefix="harness-resolve-") as tmp:
        reqs = Path(tmp) / "requirements.in"
        reqs.write_text("\n".join([*env.requirements, PYTEST_REQUIREMENT]) + "\n")
        args = [_uv_binary(), "pip", "compile", str(reqs), "--quiet", "--no-header",
                "--no-annotate", "--python-version", env.python, "--python-platform",
                platform, *install_args(env)]
        sources = [b for b in env.builds if not b.isolation]
        if sources:
            # uv reads an sdist's dependencies by running its setup.py; TE's imports torch.
            args += ["--python", _resolver_python(sources, cache_dir)]
            for setting in sources:
                args += ["--no-build-isolation-package", setting.dist]
        proc = subprocess.run(args, capture_output=True, text=True, env=uv_environ(),
                              check=False, timeout=1800, cwd=tmp)
    seconds = round(time.monotonic() - started, 1)
    if proc.returncode == 0:
        pins = [ln for ln in proc.stdout.splitlines() if ln and not ln.startswith(("#", " "))]
        return EnvCheck(name=env.name, backend=env.backend, resolves="yes",
                        packages=len(pins), seconds=seconds)
    host = unreachable_host(proc.stderr)
    return EnvCheck(name=env.name, backend=env.backend,
                    resolves="no" if host is None else "unreachable",
                    seconds=seconds, unreachable=host,
                    reason=(f"needs {host}, which this machine cannot reach" if host
                            else first_lines(proc.stderr)))


def build_env(env: EnvSpec, backend: Backend, check: EnvCheck) -> EnvCheck:
    started = time.monotonic()
    try:
        backend.realize(env)
    except EnvImportError as exc:
        return _with(check, started, builds="yes", imports="no", reason=str(exc))
    except HarnessError as exc:
        host = unreachable_host(str(exc))
        return _with(check, started, builds="no", reason=first_lines(str(exc)),
                     unreachable=host)
    return _with(check, started, builds="yes", imports="yes")


def _with(check: EnvCheck, started: float, **changes: Any) -> EnvCheck:
    seconds = round(check.seconds + time.monotonic() - started, 1)
    return EnvCheck(**{**check.to_dict(), **changes, "seconds": seconds})


def unreachable_host(text: str) -> str | None:
    """The host a failed install could not reach, or None when the failure is not the
    network's."""
    for line in text.splitlines():
        if _NETWORK.search(line):
            for candidate in (line, text):
                match = _HOST.search(candidate)
                if match:
                    return match.group(1)
            return "the network"
    return None


def first_lines(text: str, count: int = 4) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    hints = [ln for ln in lines if not ln.startswith("hint:")]
    return " | ".join((hints or lines)[:count])[:600]


def _resolver_python(settings: list[BuildSetting], cache_dir: Path) -> str:
    """A scratch venv holding the build settings' requirements, for reading the metadata of
    sdists that must be built without isolation. Their runtime versions do not matter for
    metadata, so one venv serves every environment with the same settings."""
    requires = sorted({r for s in settings for r in s.requires})
    digest = hashlib.sha256(json.dumps(requires).encode()).hexdigest()[:12]
    root = cache_dir / "preflight" / f"resolver-{digest}"
    root.parent.mkdir(parents=True, exist_ok=True)
    python = root / "bin" / "python"
    with locked(root.with_name(root.name + ".lock")):
        if not (root / "ready").exists():
            uv = _uv_binary()
            subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(root)],
                           check=True, env=uv_environ(), capture_output=True)
            subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python),
                            *requires], check=True, env=uv_environ(), capture_output=True)
            (root / "ready").write_text("")
    return str(python)


def render_table(checks: Sequence[EnvCheck]) -> str:
    rows = ["| environment | resolves | builds | imports | packages | seconds | reason |",
            "|---|---|---|---|---|---|---|"]
    for c in checks:
        reason = c.reason.replace("|", "/").replace("\n", " ")
        rows.append(f"| {c.name} | {c.resolves} | {c.builds} | {c.imports} | {c.packages} | "
                    f"{c.seconds:g} | {reason} |")
    return "\n".join(rows)


def summary(checks: Sequence[EnvCheck]) -> str:
    def count(stage: str, value: str) -> int:
        return sum(getattr(c, stage) == value for c in checks)

    unreachable = sorted({c.unreachable for c in checks if c.unreachable})
    text = (f"{len(checks)} environments: {count('resolves', 'yes')} resolve, "
            f"{count('resolves', 'no')} do not")
    if any(c.builds != "-" for c in checks):
        text += (f"; {count('builds', 'yes')} build, {count('builds', 'no')} do not; "
                 f"{count('imports', 'yes')} import, {count('imports', 'no')} do not")
    if unreachable:
        n = sum(c.unreachable is not None for c in checks)
        text += f"; {n} need a host this machine cannot reach ({', '.join(unreachable)})"
    return text

"""uv virtualenvs: one per distinct environment, keyed by content, built with uv's shared cache."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from packaging.utils import canonicalize_name

from harness.core import atomic
from harness.core.errors import EnvBuildError, one_line
from harness.core.matrix import EnvSpec
from harness.core.paths import uv_binary
from harness.core.releases import release_order
from harness.envs import overlay, sourcebuild, wheelkey
from harness.envs.base import (
    Backend,
    Environment,
    Handover,
    LaunchRequest,
    Process,
    bytecode_variables,
    check_python,
    launch_local,
    read_fingerprint,
    start_group,
)
from harness.envs.overlay import Base
from harness.matrix.sources import is_url

MARKER = "harness-env.json"
PYTEST_REQUIREMENT = "pytest>=7"
UV_TIMEOUT = 4 * 3600.0


def _slug(name: str) -> str:
    """An environment's name as its folder begins (numpy<2, numpy>=2: numpy-lt2, numpy-ge2)."""
    name = _OPERATOR.sub(lambda m: f"-{_WORDS[m[0]]}", name)
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")[:60]


_BUILT = re.compile(r"^\s*Built (\S+?)==", re.MULTILINE)  # uv's line for each sdist it built
_WORDS = {"<=": "le", ">=": "ge", "==": "eq", "!=": "ne", "~=": "compat", "<": "lt", ">": "gt"}
_OPERATOR = re.compile("|".join(map(re.escape, _WORDS)))


class UvBackend(Backend):
    name = "uv"
    checks_imports = True
    hands_over = True

    def path_for(self, spec: EnvSpec, base: Base | None = None) -> Path:
        # An overlay is also what its base holds: another base torch is another overlay.
        key = spec.key if base is None else hashlib.sha256(
            f"{spec.key}:{base.identity}".encode()).hexdigest()[:16]
        return self.root / f"{_slug(spec.name)}-{key}"

    def _locate(self, spec: EnvSpec) -> tuple[Path, Base | None]:
        """The venv's folder, and the base an overlay inherits."""
        check_python(spec)
        base = overlay.find_base(spec.base) if spec.base else None
        return self.path_for(spec, base), base

    def _build_dir(self, place: tuple[Path, Base | None]) -> Path:
        return place[0]

    def _find(self, spec: EnvSpec, place: tuple[Path, Base | None]) -> Environment | None:
        path, _ = place
        marker = _marker(path)
        if marker is None or (spec.refresh_before is not None
                              and marker["built_at"] < spec.refresh_before):
            return None
        if not all((path / part).exists() for part in ("bin/python", "lib", "pyvenv.cfg")):
            return None  # half-deleted since (or its interpreter gone): built again
        return Environment(spec=spec, location=str(path), python=str(path / "bin" / "python"),
                           fingerprint=marker["fingerprint"])

    def _build(self, spec: EnvSpec, place: tuple[Path, Base | None],
               handover: Handover | None = None) -> Environment:
        path, base = place
        shutil.rmtree(path, ignore_errors=True)  # a venv without its marker is half-built
        started = time.time()
        python = str(path / "bin" / "python")
        shadows = self._build_overlay(spec, path, base) if base else {}
        toolchain, provenance = ({}, []) if base else self._build_venv(spec, path)
        cuda_home = toolchain.get("CUDA_HOME")  # a toolkit the harness fetched, from now on
        if wheelkey.took_wheels(provenance) and not cuda_home:
            cuda_home = sourcebuild.own_cuda_home(spec, path)
        if handover is not None:  # what launch reads; the rest of the fingerprint follows
            handover(Environment(spec=spec, location=str(path), python=python, built=True,
                                 fingerprint={"cuda_home": cuda_home} if cuda_home else {}))
        # Read as a cell sees the environment; importing leaves its bytecode for the cells.
        runtime = sourcebuild.runtime_variables(path, cuda_home,
                                                os.environ.get("LD_LIBRARY_PATH", ""),
                                                wheelkey.took_wheels(provenance))
        fingerprint = read_fingerprint(python, spec,
                                       variables={**runtime, **bytecode_variables(path)})
        if base is not None:
            fingerprint["overlay"] = {"base": base.python, "base_identity": base.identity,
                                      "shadowed": shadows}
        if cuda_home:
            fingerprint["cuda_home"] = cuda_home
        if provenance:
            fingerprint["provenance"] = provenance
        marker = {"key": spec.key, "name": spec.name, "requirements": list(spec.requirements),
                  "built_at": started, "build_seconds": round(time.time() - started, 1),
                  "fingerprint": fingerprint}
        atomic.write_text(path / MARKER, json.dumps(marker, indent=1))
        return Environment(spec=spec, location=str(path), python=python,
                           fingerprint=fingerprint, built=True)

    def _build_overlay(self, spec: EnvSpec, path: Path, base: Base) -> dict[str, str]:
        """Build the overlay; what it shadows of its base (name -> "base -> overlay")."""
        if spec.source_builds:
            raise EnvBuildError(f"{spec.name}: an overlay cannot build packages from source "
                                "(" + ", ".join(b.dist for b in spec.source_builds) + ")")
        conflicts = overlay.inherited_conflicts(spec.requirements, base.packages)
        if conflicts:
            raise EnvBuildError(f"{spec.name} asks for " + "; ".join(conflicts)
                                + ": an overlay never replaces its base's torch or CUDA stack")
        python = str(path / "bin" / "python")
        _uv(["venv", "--quiet", "--python", base.python, str(path)], spec)
        overlay.link_base(python, base)
        pins = resolve(spec, [*spec.requirements, PYTEST_REQUIREMENT], "--python", python,
                       base=base.packages,
                       lead=f"{spec.name} does not fit on its base {base.python}: ")
        added = overlay.added_by_overlay(pins, base.packages)
        if added:
            _uv(["pip", "install", "--python", python, "--no-deps", *install_args(spec), *added],
                spec)
        return overlay.shadowed(pins, base.packages)

    def _build_venv(self, spec: EnvSpec, path: Path) -> tuple[dict[str, str], list[str]]:
        """Build the venv; the variables that chose its CUDA toolkit, and its provenance."""
        python = str(path / "bin" / "python")
        interpreter = find_interpreter(spec.python)
        _uv(["venv", "--quiet", "--python", interpreter, str(path)], spec)
        install = ["pip", "install", "--python", python, *install_args(spec)]
        # Wheels `envs build` compiled for this environment's torch (if it pins one with ==)
        # or built from the URLs it names; a URL it names goes by its wheel's file instead.
        torch = wheelkey.pinned_torch(spec.requirements)
        choice = (wheelkey.choose(spec, torch, wheelkey.gpu_archs()) if spec.find_links
                  else wheelkey.Choice(offered=(), refused=()))
        requirements = choice.swapped(spec.requirements)
        if not spec.source_builds:
            _uv([*install, *requirements, PYTEST_REQUIREMENT], spec)
            return {}, self._provenance(spec, python, choice, "") if choice.offered else []
        failed = ""
        if choice.offered:  # all from wheels: no toolkit fetched, no compiler started
            try:
                _uv([*install, "--no-build", *(f"--find-links={e.where}" for e in choice.offered),
                     *sourcebuild.no_isolation_args(spec), *requirements, PYTEST_REQUIREMENT,
                     *sourcebuild.build_requirements(spec)], spec, lead="")
                return {}, self._provenance(spec, python, choice, "")
            except EnvBuildError as exc:  # then built here, none of those wheels taken
                failed = one_line(str(exc), 300)
                choice = replace(choice, offered=())
        if spec.find_links:  # a runner given wheels says why it compiles all the same
            why = (f"installing from it failed: {failed}" if failed
                   else "; ".join(sorted({why for _, why in choice.refused})) if choice.refused
                   else "none for its key" if torch else "its torch is not pinned with ==")
            print(f"environment {spec.name}: no wheel of the wheel folder fits ({why}): "
                  "building here", file=sys.stderr, flush=True)
        nvcc, toolchain = sourcebuild.compiler(spec, self.cache_dir)
        sourcebuild.check_nvcc(spec, nvcc)  # before minutes of installing torch
        # What a package built without isolation compiles against goes in first.
        _uv([*install, *sourcebuild.build_requirements(spec)], spec)
        variables = {**sourcebuild.build_variables(spec), **toolchain,
                     **sourcebuild.header_variables(python)}
        # uv caches a wheel built from an sdist by the sdist alone (a TE built against
        # torch 2.5 would serve torch 2.6): a cache per build environment keeps them apart.
        freeze = _uv(["pip", "freeze", "--python", python], spec)
        identity = json.dumps([spec.python, freeze, sorted(variables.items()), nvcc])
        digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
        variables["UV_CACHE_DIR"] = str(self.cache_dir / "uv-build-cache" / digest)
        said = _uv([*install, *sourcebuild.no_isolation_args(spec), *spec.requirements,
                    PYTEST_REQUIREMENT], spec, variables, said=True)
        return toolchain, self._provenance(spec, python, choice, said)

    def _provenance(self, spec: EnvSpec, python: str, choice: wheelkey.Choice,
                    said: str) -> list[str]:
        """Where each source-built distribution came from (``said``: what uv's install said)."""
        listed = json.loads(_uv(["pip", "list", "--format", "json", "--python", python], spec))
        return choice.provenance({canonicalize_name(d["name"]): d["version"] for d in listed},
                                 tuple(dict.fromkeys([*(canonicalize_name(b.dist)
                                                         for b in spec.source_builds),
                                                        *wheelkey.url_sources(spec)])),
                                 {canonicalize_name(name) for name in _BUILT.findall(said)})

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        # As an activated venv: the environment's own executables come first on PATH.
        path = request.env.get("PATH", os.environ.get("PATH", os.defpath))
        variables = {**request.env, "VIRTUAL_ENV": env.location,
                     "PATH": os.pathsep.join([str(Path(env.location) / "bin"), path])}
        # Built against a fetched toolkit: it, unless the matrix's `env:` names another.
        home = env.fingerprint.get("cuda_home")
        inherited = variables.get("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH", ""))
        runtime = sourcebuild.runtime_variables(
            env.location, str(home) if home else None, inherited,
            wheelkey.took_wheels(env.fingerprint.get("provenance") or ()))
        variables = {**runtime, **variables, **{k: v for k, v in runtime.items()
                                                  if k == "LD_LIBRARY_PATH"},
                     **bytecode_variables(env.location)}
        return launch_local(env.python, replace(request, env=variables))

    def listing(self) -> list[dict[str, Any]]:
        out = []
        for folder in sorted(p for p in self.root.glob("*") if p.is_dir()):
            marker = _marker(folder)
            if marker is not None:
                out.append({"backend": self.name, "name": marker["name"], "key": marker["key"],
                            "location": str(folder), "built_at": marker["built_at"],
                            # a folder an earlier harness named: never used again
                            "stale": not folder.name.startswith(_slug(marker["name"]) + "-")})
            elif not _building(folder):  # a build that failed or was killed
                out.append({"backend": self.name, "name": folder.name,
                            "key": folder.name.rpartition("-")[2], "location": str(folder),
                            "built_at": None, "stale": True, "half_built": True})
        return out


def _marker(folder: Path) -> dict[str, Any] | None:
    """The marker a finished build wrote in ``folder``; None: it is half-built."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    fields = ("name", "key", "built_at", "fingerprint")
    return marker if isinstance(marker, dict) and all(f in marker for f in fields) else None


def _building(folder: Path) -> bool:
    """Whether a build holds ``folder``'s lock now."""
    try:
        with FileLock(folder.with_name(folder.name + ".lock"), timeout=0):
            return False
    except Timeout:
        return True


@functools.cache
def find_interpreter(version: str) -> str:
    """What uv finds for ``version``, else pyenv's (whose shims answer only when activated)."""
    with contextlib.suppress(subprocess.TimeoutExpired):  # --system: never a project's .venv
        found = subprocess.run([_uv_binary(), "python", "find", "--system", version],
                               capture_output=True, text=True, env=uv_environ(), check=False,
                               timeout=120)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    minor = ".".join(version.split(".")[:2])  # 3.12.1's binary is python3.12
    candidates = sorted([*root.glob(f"versions/{version}/bin/python{minor}"),
                         *root.glob(f"versions/{version}.*/bin/python{minor}")],
                        key=lambda p: release_order(p.parts[-3]))
    return str(candidates[-1]) if candidates else version


def install_args(spec: EnvSpec) -> list[str]:
    folders = [f"--find-links={d}" for d in spec.find_links]
    if spec.refresh_before is not None and not spec.offline:
        folders.append("--refresh")  # ask the index again, not uv's cached answer
    if spec.offline:  # nothing fetched behind the user's back: a missing wheel is an error
        served = any(is_url(d) for d in spec.find_links)  # uv's --offline: no http
        return [*([] if served else ["--offline"]), "--no-index", *folders]
    return [*index_args(spec.index_urls), *folders]


def index_args(urls: tuple[str, ...]) -> list[str]:
    # A CUDA index beside PyPI: the cu121 torch from there, everything else from PyPI.
    extra = [arg for url in urls for arg in ("--extra-index-url", url)]
    return [*extra, "--index-strategy", "unsafe-best-match"] if urls else []


#: From this release uv reads UV_SYSTEM_CERTS and warns that UV_NATIVE_TLS is deprecated.
SYSTEM_CERTS_SINCE = (0, 13)
CERT_VARIABLES = ("UV_SYSTEM_CERTS", "UV_NATIVE_TLS")


def uv_environ() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")  # many runners have no route to them
    # A TLS-intercepting proxy's CA is in the system store: said unless the user said it.
    if not any(name in env for name in CERT_VARIABLES):
        env[certificate_variable(uv_version(_uv_binary()))] = "1"
    env.pop("VIRTUAL_ENV", None)
    return env


def certificate_variable(version: tuple[int, ...]) -> str:
    """How this uv release is told to trust the system's certificates (unknown: the old)."""
    return CERT_VARIABLES[0] if version >= SYSTEM_CERTS_SINCE else CERT_VARIABLES[1]


@functools.cache
def uv_version(binary: str) -> tuple[int, ...]:
    """``uv --version`` as numbers (0, 13, 9); () when it does not say."""
    try:
        said = subprocess.run([binary, "--version"], capture_output=True, text=True,
                              check=False, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    found = re.match(r"uv (\d+)\.(\d+)(?:\.(\d+))?", said)
    return tuple(int(n) for n in found.groups() if n is not None) if found else ()


_FINDING = threading.Lock()


def _uv_binary() -> str:
    """The uv executable, found once: the uv package's finder is not thread-safe."""
    with _FINDING:
        return _found_uv()


@functools.cache
def _found_uv() -> str:
    found = uv_binary()
    if found is None:
        raise EnvBuildError("uv is not installed: no uv on PATH, nor beside this Python "
                            "(pip install uv)")
    return found


def uv_error(stderr: str, count: int = 6) -> str:
    """uv's failure in ``count`` lines at most: its error line, then the end of what followed."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    if not lines:
        return ""
    start = next((i for i, ln in enumerate(lines) if ln.startswith("error:")), 0)
    head, rest = lines[start], lines[start + 1:]
    if rest and rest[0].lstrip().startswith("cause:"):  # the first line, all a cell shows, says why
        head = f"{head.rstrip(':')}: {rest.pop(0).strip().removeprefix('cause:').strip()}"
    return "\n".join([head, *rest[-(count - 1):]])


def resolve(spec: EnvSpec, requirements: list[str], *options: str,
            base: dict[str, str] | None = None, variables: dict[str, str] | None = None,
            timeout: float = UV_TIMEOUT, lead: str | None = None) -> list[str]:
    """``uv pip compile`` of ``requirements`` with ``options`` (for which Python): the pinned
    lines; with ``base`` (an overlay's base packages), resolved against those."""
    with tempfile.TemporaryDirectory(prefix="harness-resolve-") as tmp:
        reqs = Path(tmp) / "requirements.in"
        reqs.write_text("\n".join(requirements) + "\n")
        args = ["pip", "compile", str(reqs), "--no-header", "--no-annotate", *options,
                *install_args(spec)]
        if base is not None:
            args += overlay.resolution_args(base, Path(tmp) / "base")
        said = _uv(args, spec, variables, timeout, cwd=Path(tmp), lead=lead)
    return [ln for ln in said.splitlines() if ln and not ln.startswith(("#", " "))]


def _uv(args: list[str], spec: EnvSpec, variables: dict[str, str] | None = None,
        timeout: float = UV_TIMEOUT, *, program: list[str] | None = None, said: bool = False,
        cwd: Path | None = None, lead: str | None = None) -> str:
    """Run uv (or ``program``, pip) in a session of its own (a timeout or Ctrl-C kills its
    compilers too): its stdout (``said``: and stderr), else EnvBuildError, its message uv's
    words after ``lead`` (by default: which command failed for which environment)."""
    name = "pip" if program else "uv"
    try:
        group = start_group([*(program or [_uv_binary()]), *args],
                            {**uv_environ(), **(variables or {})}, text=True, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise EnvBuildError(f"{name} failed to start: {exc}") from exc
    proc = group.popen
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        group.kill()
        proc.communicate()
        raise EnvBuildError(f"{name} {args[0]} for {spec.name} ran over {timeout:g} s; "
                            "killed with everything it started") from None
    finally:
        if proc.poll() is None:  # Ctrl-C while waiting: leave nothing behind
            group.kill()
        group.wait()  # forgets the group, killing what it left running
    if proc.returncode != 0:  # led by what uv's last lines of a build do not say
        cause = sourcebuild.first_compiler_error(stderr)
        raise EnvBuildError((f"{name} {args[0]} failed for {spec.name}: " if lead is None
                             else lead) + (f"{cause}\n" if cause else "") + uv_error(stderr))
    return str(stdout) + (str(stderr) if said else "")

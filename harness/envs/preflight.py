"""Preflight: does each environment resolve for its own Python and platform, and with
``build=True`` build here and import (a CUDA torch does so without a GPU)? And ``harness
wheelhouse DIR``: every wheel they need in one folder, for ``--offline --find-links``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from harness.core.backends import REGISTRY
from harness.core.errors import EnvImportError, HarnessError
from harness.core.matrix import BuildSetting, EnvSpec
from harness.envs import Backend, sourcebuild, uv, wheelkey
from harness.envs.base import check_python, locked
from harness.envs.images import find_ca_bundle
from harness.envs.overlay import added_by_overlay, find_base
from harness.envs.wheelkey import Filed, WheelKey

#: The platform GPU runners are: glibc x86-64 (manylinux_2_28 covers current torch wheels).
DEFAULT_PLATFORM = "x86_64-manylinux_2_28"
_NETWORK = re.compile(r"dns error|Could not resolve host|failed to lookup address|"
                      r"Connection refused|connection timed out|Network is unreachable|"
                      r"error sending request", re.IGNORECASE)
_HOST = re.compile(r"https?://([A-Za-z0-9.-]+)")
RESOLVE_TIMEOUT = 1800


@dataclass(frozen=True, kw_only=True)
class EnvCheck:
    """One environment's preflight: each stage yes, no or "-" (not tried); resolves may be
    "unreachable" (a host this machine cannot reach), builds "skipped" (``skip_builds``)."""

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


def check_environments(envs: Sequence[EnvSpec], *, backends: dict[str, Backend],
                       cache_dir: Path, build: bool = False, platform: str = DEFAULT_PLATFORM,
                       jobs: int = 4, skip_builds: frozenset[str] = frozenset(),
                       on_done: Callable[[EnvCheck], None] = lambda _: None
                       ) -> list[EnvCheck]:
    """Resolve every environment (``jobs`` at a time), then build those that resolved, one at
    a time, but for those that build a distribution of ``skip_builds`` from source."""
    if any(REGISTRY[env.backend].installs for env in envs):
        uv._uv_binary()  # uv found here, once, before any thread asks; then its release
        uv.uv_environ()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        resolved = list(pool.map(lambda e: resolve_env(e, cache_dir=cache_dir,
                                                       platform=platform), envs))
    out = []
    for env, check in zip(envs, resolved, strict=True):
        skipped = sorted({b.dist for b in env.source_builds} & skip_builds)
        if build and check.resolves in ("yes", "-") and skipped:
            check = replace(check, builds="skipped", reason=(
                f"not built here (--skip-build {' '.join(skipped)}): built from source"))
        elif build and check.resolves in ("yes", "-"):
            check = build_env(env, backends[env.backend], check)
        on_done(check)
        out.append(check)
    return out


def resolve_env(env: EnvSpec, *, cache_dir: Path, platform: str) -> EnvCheck:
    check = EnvCheck(name=env.name, backend=env.backend, resolves="-")
    if not REGISTRY[env.backend].installs:
        return replace(check, reason=f"the {env.backend} backend installs nothing")
    started = time.monotonic()
    try:
        pins = _compile(env, cache_dir=cache_dir, platform=platform)
    except (HarnessError, OSError) as exc:
        host = unreachable_host(str(exc))
        return _with(check, started, resolves="no" if host is None else "unreachable",
                     unreachable=host, reason=(f"needs {host}, which this machine cannot reach"
                                               if host else first_lines(str(exc))))
    return _with(check, started, resolves="yes", packages=len(pins))


def _on_base(env: EnvSpec, base: dict[str, str] | None) -> tuple[EnvSpec, dict[str, str] | None]:
    """An overlay with no ``base`` packages given: on this machine's base, at its Python."""
    if base is not None or not env.base:
        return env, base
    found = find_base(env.base)
    return replace(env, python=found.version), found.packages


def _compile(env: EnvSpec, *, cache_dir: Path, platform: str,
             base: dict[str, str] | None = None) -> list[str]:
    """``uv pip compile`` for the environment's Python and platform: the pinned lines, in uv's
    own words if it fails. ``base``: an overlay's base packages, else this machine's base's."""
    check_python(env)
    env, base = _on_base(env, base)
    # What source builds compile against is in the resolution too; a URL goes by a keyed wheel
    # built from it, where one fits.
    requirements = wheelkey.choose(env, wheelkey.pinned_torch(env.requirements),
                                   frozenset()).swapped(env.requirements)
    options = ["--python-version", env.python, "--python-platform", platform]
    if env.source_builds:  # uv runs setup.py for an sdist's metadata: TE's imports torch
        options += ["--python", _resolver_python(env, cache_dir),
                    *sourcebuild.no_isolation_args(env),
                    *(f"--find-links={e.where}" for e in wheelkey.filed(env.find_links))]
    return uv.resolve(env, [*requirements, uv.PYTEST_REQUIREMENT,
                            *sourcebuild.build_requirements(env)], *options, base=base,
                      variables=sourcebuild.build_variables(env), timeout=RESOLVE_TIMEOUT,
                      lead="")


def build_env(env: EnvSpec, backend: Backend, check: EnvCheck) -> EnvCheck:
    started = time.monotonic()
    try:
        backend.realize(env)
    except EnvImportError as exc:
        return _with(check, started, builds="yes", imports="no", reason=str(exc))
    except Exception as exc:  # a backend bug must not end the check of the others
        text = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
        return _with(check, started, builds="no", reason=first_lines(text),
                     unreachable=unreachable_host(text))
    return _with(check, started, builds="yes", imports="yes" if backend.checks_imports else "-")


def _with(check: EnvCheck, started: float, **changes: Any) -> EnvCheck:
    return replace(check, **changes, seconds=round(check.seconds + time.monotonic() - started, 1))


def unreachable_host(text: str) -> str | None:
    """The host a failed install could not reach, or None when the network is not why."""
    flat = " ".join(text.split())  # uv wraps its lines to the terminal's width
    found = _NETWORK.search(flat)
    if found is None:
        return None
    before = _HOST.findall(flat[:found.start()])
    after = _HOST.findall(flat[found.start():])
    return (before[-1] if before else after[0]) if before or after else "the network"


def first_lines(text: str, count: int = 4) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    hints = [ln for ln in lines if not ln.startswith(("hint:", "warning:"))]
    return " | ".join((hints or lines)[:count])[:600]


def _resolver_python(env: EnvSpec, cache_dir: Path) -> str:
    """A scratch venv that reads the metadata of the sdists built without isolation: the
    environment's Python and build requirements at its pins, shared where those are equal."""
    requires = sourcebuild.build_requirements(env)
    identity = json.dumps([env.python, requires, env.index_urls, env.find_links])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    root = cache_dir / "preflight" / f"resolver-{digest}"
    python = root / "bin" / "python"
    with locked(root.with_name(root.name + ".lock")):
        if (root / "ready").exists():
            return str(python)
        shutil.rmtree(root, ignore_errors=True)  # a half-made one from a run that failed
        uv._uv(["venv", "--quiet", "--python", uv.find_interpreter(env.python), str(root)], env)
        if requires:
            uv._uv(["pip", "install", "--quiet", "--python", str(python),
                    *uv.install_args(env), *requires], env)
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
        if count("builds", "skipped"):
            text += f"; {count('builds', 'skipped')} not built (--skip-build)"
    if unreachable:
        n = sum(c.unreachable is not None for c in checks)
        text += f"; {n} need a host this machine cannot reach ({', '.join(unreachable)})"
    return text


#: pip's platform tags for one uv ``--python-platform``: a wheel for any of them installs there.
PIP_PLATFORMS = {
    "x86_64-manylinux_2_28": ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                              "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
                              "manylinux2014_x86_64", "manylinux2010_x86_64",
                              "manylinux1_x86_64", "linux_x86_64"],
}


@dataclass(kw_only=True)
class EnvWheels:
    name: str
    wheels: list[str] = field(default_factory=list)  # pins now in the folder
    missing: dict[str, str] = field(default_factory=dict)  # pin -> why it is not
    error: str = ""  # the environment did not resolve


def build_wheelhouse(envs: Sequence[EnvSpec], folder: Path, *, cache_dir: Path,
                     platform: str = DEFAULT_PLATFORM,
                     base_packages: dict[str, str] | None = None,
                     on_done: Callable[[EnvWheels], None] = lambda _: None) -> list[EnvWheels]:
    folder.mkdir(parents=True, exist_ok=True)
    fetched: dict[tuple[str, str], str] = {}  # (pin, python) -> "" if in the folder, else why
    keyed = wheelkey.filed([str(folder)])  # what `envs build --into` compiled
    out = []
    for env in envs:
        report = EnvWheels(name=env.name)
        try:
            env, base = _on_base(env, base_packages if env.base else None)
            pins = _compile(env, cache_dir=cache_dir, platform=platform, base=base)
        except HarnessError as exc:
            report.error = first_lines(str(exc))
        else:
            for pin in added_by_overlay(pins, base or {}):
                key = (pin, env.python)  # a compiled wheel is per Python
                if key not in fetched:
                    fetched[key] = "" if wheelkey.holds(keyed, pin) else fetch_wheel(
                        pin, folder, env, platform)
                if fetched[key]:
                    report.missing[pin] = fetched[key]
                else:
                    report.wheels.append(pin)
        on_done(report)
        out.append(report)
    wheelkey.write_index(folder)
    return out


def fetch_wheel(pin: str, folder: Path, env: EnvSpec, platform: str) -> str:
    """Put the wheel for ``pin`` into ``folder``; "" when done, else why it could not be."""
    req = Requirement(pin)
    if req.url:
        url = urlparse(req.url)
        path = Path(unquote(url.path))
        if url.scheme == "file" and path.suffix == ".whl":
            if path.parent.resolve() != folder.resolve():
                shutil.copy2(path, folder / path.name)
            return ""
        return f"not a wheel: {req.url} (build a wheel of it and put it in a --find-links folder)"
    args = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", "--dest", str(folder), "--python-version", env.python,
            "--implementation", "cp", *_pip_sources(env),
            *(f"--platform={tag}" for tag in PIP_PLATFORMS.get(platform,
                                                               [platform.replace("-", "_")]))]
    try:
        proc = subprocess.run([*args, pin.split(";", 1)[0].strip()], capture_output=True,
                              text=True, check=False, timeout=1800,
                              env={**_pip_cert(), **uv.uv_environ(), "PYTHONPATH": ""})
    except subprocess.TimeoutExpired:
        return "pip download ran over 30 minutes"
    if proc.returncode == 0:
        return ""
    lines = [ln for ln in proc.stderr.splitlines() if "ERROR" in ln] or proc.stderr.splitlines()
    return f"no wheel for Python {env.python} on {platform}: " + " | ".join(lines[:2])[:300]


def wheelhouse_summary(reports: Sequence[EnvWheels], folder: Path) -> str:
    size = sum(p.stat().st_size for p in folder.glob("*.whl")) / 2**20
    count = len(list(folder.glob("*.whl")))
    missing = sum(len(r.missing) for r in reports)
    broken = sum(bool(r.error) for r in reports)
    return (f"{folder}: {count} wheels, {size:.1f} MiB, for {len(reports)} environments; "
            f"{missing} pins without a wheel, {broken} environments that do not resolve")


@dataclass(kw_only=True)
class EnvBuilt:
    name: str
    built: list[Filed] = field(default_factory=list)  # compiled here now
    kept: list[Filed] = field(default_factory=list)  # already in the folder, key and all
    error: str = ""


def build_wheels(envs: Sequence[EnvSpec], folder: Path, *, cache_dir: Path,
                 archs: tuple[str, ...] = (), platform: str = DEFAULT_PLATFORM,
                 on_done: Callable[[EnvBuilt], None] = lambda _: None) -> list[EnvBuilt]:
    """Compile each distribution the environments build from source into a key folder of
    ``folder``, for the SM numbers ``archs`` (default: each environment's GPU targets)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for env in envs:
        report = EnvBuilt(name=env.name)
        try:
            pins = _compile(env, cache_dir=cache_dir, platform=platform)
            python = _resolver_python(env, cache_dir)
            torch = wheelkey.pinned_torch(
                uv._uv(["pip", "freeze", "--python", python], env).splitlines())
            chosen = archs or sourcebuild.target_archs(env) or (sourcebuild.newest_arch(env),)
            settings: dict[str, BuildSetting] = {canonicalize_name(s.dist): s
                                                 for s in env.source_builds}
            urls = wheelkey.url_sources(env)
            for pin in pins:
                name, version = wheelkey.pin_parts(pin)
                setting = settings.get(name)
                if setting is not None:
                    key = wheelkey.wanted_key(env, setting, torch=torch, version=version, archs=(
                        chosen if env.cuda not in (None, "", "cpu") else ()))
                elif name in urls:
                    key = wheelkey.isolated_key(env, name, version)
                else:
                    continue
                done = [e for e in wheelkey.filed([str(folder)]) if e.key == key or (
                    e.pin == pin and e.key == replace(key, version=e.key.version))]
                if done:
                    report.kept.append(done[0])
                else:
                    report.built.append(_build_wheel(env, pin, python, key, folder, cache_dir,
                                                     source=urls.get(name, ""),
                                                     isolated=setting is None))
        except HarnessError as exc:
            report.error = first_lines(str(exc))
        on_done(report)
        out.append(report)
    wheelkey.write_index(folder)
    return out


def _build_wheel(env: EnvSpec, pin: str, python: str, key: WheelKey, folder: Path,
                 cache_dir: Path, *, source: str = "", isolated: bool = False) -> Filed:
    """``pip wheel`` of one pin in the environment's build venv (``isolated``: in pip's own,
    as a URL the matrix does not say how to build), filed under its key."""
    nvcc: str | None = None
    variables = _pip_cert()
    if not isolated:
        nvcc, toolchain = sourcebuild.compiler(env, cache_dir)
        sourcebuild.check_nvcc(env, nvcc)
        variables = {**sourcebuild.build_variables(env), **toolchain,
                     **sourcebuild.header_variables(python), **variables}
    if key.archs:
        variables["NVTE_CUDA_ARCHS"] = ";".join(key.archs)
        variables["TORCH_CUDA_ARCH_LIST"] = ";".join(f"{a[:-1]}.{a[-1]}" for a in key.archs)
    uv._uv(["pip", "install", "--quiet", "--python", python, *uv.install_args(env), "pip"], env)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="harness-wheel-", dir=folder) as tmp:
        # pip's wheel cache keys a build by its sdist alone: one against torch 2.2 would serve 2.3.
        uv._uv(["wheel", "--no-deps", *([] if isolated else ["--no-build-isolation"]),
                "--no-cache-dir", "--wheel-dir", tmp, *_pip_sources(env), pin], env,
               {**variables, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
               program=[python, "-m", "pip"])  # in a group of its own: Ctrl-C kills ninja's too
        wheel = next(Path(tmp).glob("*.whl"))
        version = str(parse_wheel_filename(wheel.name)[1])
        key = replace(key, version=version)
        target = folder / key.folder
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        wheel.rename(target / wheel.name)
    entry = Filed(key=key, folder=target, wheel=wheel.name, pin=pin, source=source, facts={
        "mib": round((target / wheel.name).stat().st_size / 2**20, 1),
        "seconds": round(time.monotonic() - started, 1), "nvcc": nvcc})
    wheelkey.write_manifest(entry)
    return entry


def _pip_sources(env: EnvSpec) -> list[str]:
    """Where pip looks for the environment's packages, as uv does (``uv.install_args``)."""
    return [*(f"--find-links={d}" for d in env.find_links), *(
        ["--no-index"] if env.offline else [f"--extra-index-url={u}" for u in env.index_urls])]


def _pip_cert() -> dict[str, str]:
    """A TLS-intercepting proxy's CA for pip, as uv reads it from the system store."""
    with contextlib.suppress(HarnessError):
        return {"PIP_CERT": str(find_ca_bundle())}
    return {}

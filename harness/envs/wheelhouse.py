"""``harness wheelhouse DIR``: every wheel a plan's environments need for their Python and a
platform, in one folder for ``--offline --find-links``; a pin with no wheel is listed, why."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.requirements import Requirement

from harness.core.errors import HarnessError
from harness.core.matrix import EnvSpec
from harness.envs.images import find_ca_bundle
from harness.envs.overlay import added_by_overlay, find_base
from harness.envs.preflight import DEFAULT_PLATFORM, _compile, first_lines
from harness.envs.uv import uv_environ

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
    out = []
    for env in envs:
        report = EnvWheels(name=env.name)
        try:
            base = base_packages if env.base else None
            if env.base and base is None:  # the base is on this machine
                found = find_base(env.base)
                env = replace(env, python=found.version)
                base = found.packages
            pins = _compile(env, cache_dir=cache_dir, platform=platform, base=base)
        except HarnessError as exc:
            report.error = first_lines(str(exc))
        else:
            for pin in added_by_overlay(pins, base or {}):
                key = (pin, env.python)  # a compiled wheel is per Python
                if key not in fetched:
                    fetched[key] = fetch_wheel(pin, folder, python=env.python,
                                               platform=platform, find_links=env.find_links,
                                               index_urls=env.index_urls)
                if fetched[key]:
                    report.missing[pin] = fetched[key]
                else:
                    report.wheels.append(pin)
        on_done(report)
        out.append(report)
    return out


def fetch_wheel(pin: str, folder: Path, *, python: str, platform: str,
                find_links: tuple[str, ...] = (), index_urls: tuple[str, ...] = ()) -> str:
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
            "--only-binary=:all:", "--dest", str(folder), "--python-version", python,
            "--implementation", "cp", *(f"--find-links={d}" for d in find_links),
            *(f"--extra-index-url={u}" for u in index_urls)]
    for tag in PIP_PLATFORMS.get(platform, [platform.replace("-", "_")]):
        args += ["--platform", tag]
    env = {**uv_environ(), "PYTHONPATH": ""}
    with contextlib.suppress(HarnessError):  # a TLS-intercepting proxy's CA, as for uv
        env.setdefault("PIP_CERT", str(find_ca_bundle()))
    try:
        proc = subprocess.run([*args, pin.split(";", 1)[0].strip()], capture_output=True,
                              text=True, check=False, env=env, timeout=1800)
    except subprocess.TimeoutExpired:
        return "pip download ran over 30 minutes"
    if proc.returncode == 0:
        return ""
    lines = [ln for ln in proc.stderr.splitlines() if "ERROR" in ln] or proc.stderr.splitlines()
    return f"no wheel for Python {python} on {platform}: " + " | ".join(lines[:2])[:300]


def summary(reports: Sequence[EnvWheels], folder: Path) -> str:
    size = sum(p.stat().st_size for p in folder.glob("*.whl")) / 2**20
    count = len(list(folder.glob("*.whl")))
    missing = sum(len(r.missing) for r in reports)
    broken = sum(bool(r.error) for r in reports)
    return (f"{folder}: {count} wheels, {size:.1f} MiB, for {len(reports)} environments; "
            f"{missing} pins without a wheel, {broken} environments that do not resolve")

"""Overlay environments: a venv inheriting an interpreter's packages (a runner's torch) through
a ``.pth`` file, resolved against stand-ins of them; never replacing its torch or CUDA stack."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.core.errors import EnvBuildError, UsageError, one_line
from harness.core.releases import parsed
from harness.envs.base import MIN_PYTHON, NEEDS_PYTHON, purelib, read_fingerprint
from harness.envs.wheelkey import pin_parts

PTH_NAME = "_harness_base.pth"
# The user site too: clusters put torch there with `pip install --user`.
_SITE_DIRS = ("import json, site, sys, sysconfig; paths = [*site.getsitepackages(), "
              "sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib'], "
              "*([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]; "
              "print(json.dumps([sys.version_info[:3], list(dict.fromkeys(paths))]))")


@dataclass(frozen=True, kw_only=True)
class Base:
    """The interpreter an overlay inherits from, as it is now."""

    python: str
    fingerprint: dict[str, Any]
    site_dirs: tuple[str, ...]

    @property
    def packages(self) -> dict[str, str]:
        return {canonicalize_name(k): v for k, v in self.fingerprint.get("packages", {}).items()}

    @property
    def version(self) -> str:  # X.Y: an overlay runs on it, whatever ``python:`` says
        return ".".join(str(self.fingerprint.get("python", "")).split(".")[:2])

    @property
    def identity(self) -> str:  # the interpreter and exactly what it holds
        blob = json.dumps([self.python, self.fingerprint.get("python"),
                           sorted(self.packages.items())])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def find_base(name: str) -> Base:
    python = _interpreter(name)
    try:
        out = subprocess.run([python, "-c", _SITE_DIRS], capture_output=True, text=True,
                             check=False, timeout=120, env={**os.environ, "PYTHONPATH": ""})
        version, paths = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvBuildError(f"base interpreter {python} does not run: {exc}") from None
    except (ValueError, TypeError):  # not JSON, or not its two parts: a banner, Python 2
        said = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:]
        raise EnvBuildError(f"base interpreter {python} does not run: exit {out.returncode}"
                            + "".join(f": {one_line(s)}" for s in said)) from None
    if tuple(version[:2]) < MIN_PYTHON:
        raise EnvBuildError(f"base interpreter {python} is Python {version[0]}.{version[1]}: "
                            + NEEDS_PYTHON)
    dirs = tuple(d for d in paths if Path(d).is_dir())
    return Base(python=python, fingerprint=read_fingerprint(python), site_dirs=dirs)


def _interpreter(name: str) -> str:
    """``host``: HARNESS_HOST_PYTHON, else the machine's python3 outside any virtualenv."""
    if name == "host" and os.environ.get("HARNESS_HOST_PYTHON"):
        name = os.environ["HARNESS_HOST_PYTHON"]
    if name == "host":
        active = os.environ.get("VIRTUAL_ENV") or (sys.prefix if sys.prefix != sys.base_prefix
                                                   else None)
        path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                               if not (active and p.startswith(active)))
        found = shutil.which("python3", path=path)
    else:
        found = shutil.which(name) or (name if Path(name).is_file() else None)
    if found is None:
        raise EnvBuildError(f"base interpreter {name!r} not found"
                            + (" (no python3 on PATH outside a virtualenv)"
                               if name == "host" else ""))
    return found


def link_base(venv_python: str, base: Base) -> None:
    """The base's packages importable after the venv's own; by addsitedir, so the base's own
    .pth files (editable installs, NGC's) work too."""
    (purelib(venv_python) / PTH_NAME).write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in base.site_dirs))


def kept(name: str) -> bool:  # what an overlay never replaces
    return name in ("torch", "triton") or name.startswith("nvidia-")


def resolution_args(packages: dict[str, str], folder: Path) -> list[str]:
    """``uv pip compile`` arguments to resolve against a base: a metadata-only wheel per
    package, the kept ones constrained, every version preferred (the output file's pins)."""
    folder.mkdir(parents=True, exist_ok=True)
    usable = {n: str(v) for n, v in ((n, parsed(v)) for n, v in packages.items()) if v}
    for name, version in usable.items():
        _stand_in_wheel(folder, name, version)
    constraints = folder / "base-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(usable.items())
                                   if kept(n)))
    preferences = folder / "resolved.txt"
    preferences.write_text("".join(f"{n}=={v}\n" for n, v in sorted(usable.items())))
    return ["--constraint", str(constraints), f"--find-links={folder}",
            "--output-file", str(preferences)]


def _stand_in_wheel(folder: Path, name: str, version: str) -> None:
    import zipfile

    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{p},,\n" for p in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as wheel:
        for member, text in files.items():
            wheel.writestr(member, text)


def inherited_conflicts(requirements: tuple[str, ...], base: dict[str, str]) -> list[str]:
    """Requirements asking a kept package (torch) at a version the base does not have."""
    out = []
    for text in requirements:
        req = Requirement(text)
        have = base.get(name := canonicalize_name(req.name))
        if have is not None and kept(name) and req.specifier and not req.specifier.contains(
                have, prereleases=True):
            out.append(f"{text} (the base has {req.name} {have})")
    return out


def added_by_overlay(pins: list[str], base: dict[str, str]) -> list[str]:
    """The resolved lines the base does not already hold at that version."""
    return [line for line in pins if not _held(line, base)]


def shadowed(pins: list[str], base: dict[str, str]) -> dict[str, str]:
    """Inherited packages the overlay installs at another version: name -> "base -> overlay"."""
    return {name: f"{base[name]} -> {pin_parts(line)[1] or line.split('@', 1)[-1].strip()}"
            for line in added_by_overlay(pins, base) if (name := pin_parts(line)[0]) in base}


def _held(line: str, base: dict[str, str]) -> bool:
    """The base holds ``line``'s version (1.00 is 1.0); a URL pin (no version) never."""
    name, pinned = pin_parts(line)
    have = base.get(name)
    a, b = parsed(have or ""), parsed(pinned)
    return bool(have and pinned) and (a == b if a and b else have == pinned)


def read_packages(path: Path) -> dict[str, str]:
    """``name==version`` lines (``pip list --format=freeze``); ``-e`` and ``@ URL`` skipped."""
    out: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-e ") or " @ " in line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not version.strip():
            raise UsageError(f"{path}:{number}: expected name==version, got {line!r}")
        out[canonicalize_name(name.strip())] = version.strip()
    return out

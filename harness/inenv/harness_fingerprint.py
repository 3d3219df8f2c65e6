"""Print, as JSON, what is installed in this interpreter's environment (stdlib only); with
``--import DIST...``, first what fails to import of those distributions (``"imports"``)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.metadata as md
import json
import os
import platform
import sys
import traceback
from typing import Any

KEY_PACKAGES = ("torch", "numpy", "transformers", "transformer-engine",
                "transformer-engine-torch", "flash-attn", "flashinfer-python", "mergekit",
                "transformer-lens", "llm-foundry", "mosaicml", "pytest")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def installed() -> dict[str, Any]:
    """The interpreter and the distributions, from their metadata alone (nothing imported)."""
    packages: dict[str, str] = {}
    for dist in md.distributions():  # in sys.path order: the first one is what imports
        name = dist.metadata["Name"]
        if name:
            packages.setdefault(_norm(name), dist.version)
    freeze = "\n".join(f"{k}=={v}" for k, v in sorted(packages.items()))
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "packages": packages,
        "key": {_norm(k): packages[_norm(k)] for k in KEY_PACKAGES if _norm(k) in packages},
        "freeze_sha256": hashlib.sha256(freeze.encode()).hexdigest()[:16],
    }


def _torch() -> dict[str, Any]:
    try:
        import torch
    except Exception as exc:  # a broken build is a finding, not a harness crash
        return {"import_error": f"{type(exc).__name__}: {exc}"[:500]}
    cudnn = None
    with contextlib.suppress(Exception):
        cudnn = torch.backends.cudnn.version()
    return {"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
            "hip": getattr(torch.version, "hip", None),
            "cuda_available": bool(torch.cuda.is_available())}


def top_level_modules(dist_name: str) -> list[str]:
    """The importable top-level names a distribution installs (top_level.txt, else RECORD)."""
    dist = md.distribution(dist_name)
    text = dist.read_text("top_level.txt")
    if text:
        names = text.split()
    else:  # a package's __init__.py, or a module at the top
        names = [p.parts[0] if len(p.parts) > 1 else p.stem for p in dist.files or ()
                 if p.parts[1:] == ("__init__.py",) or (len(p.parts) == 1 and p.suffix == ".py")]
    return sorted({n for n in names if n and n.isidentifier() and not n.startswith("_")})


def check_imports(dist_names: list[str]) -> dict[str, dict[str, str | None]]:
    """Per distribution, per top-level module: None, or why it does not import."""
    out: dict[str, dict[str, str | None]] = {}
    for name in dist_names:
        try:
            modules = top_level_modules(name)
        except md.PackageNotFoundError:
            out[name] = {"": "not installed"}
            continue
        out[name] = {}
        for module in modules:
            try:
                importlib.import_module(module)
                out[name][module] = None
            except BaseException as exc:  # SystemExit from a module is a finding too
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                out[name][module] = last[:400]
    return out


def fingerprint(dist_names: list[str] | None = None) -> dict[str, Any]:
    """With ``dist_names``, their imports first with no GPU visible (a build may run beside
    cells); given back before the fingerprint asks whether CUDA is available."""
    out = installed()  # before any import: one may edit sys.path
    if dist_names is not None:
        saved = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        out["imports"] = check_imports(dist_names)
        os.environ.pop("CUDA_VISIBLE_DEVICES")
        if saved is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
        # Broken: the fingerprint goes unused, and a torch imported again could crash.
        if any(error for modules in out["imports"].values() for error in modules.values()):
            return out
    if "torch" in out["packages"]:
        out["torch"] = _torch()
    return out


def main(argv: list[str]) -> None:
    # What modules print while imported (a banner, a C library's printf) goes to stderr.
    sys.stdout.flush()
    result_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        result = fingerprint(argv[1:] if argv[:1] == ["--import"] else None)
    finally:
        sys.stdout.flush()
    with os.fdopen(result_fd, "w") as out:
        json.dump(result, out, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1:])

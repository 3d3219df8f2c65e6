"""Print, as JSON, what is really installed in the environment this interpreter belongs to.

Run inside the environment under test (stdlib only): ``python harness_fingerprint.py``."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as md
import json
import platform
import sys
from typing import Any

KEY_PACKAGES = ("torch", "numpy", "transformers", "transformer-engine", "transformer_engine",
                "transformer-engine-torch", "flash-attn", "flashinfer-python", "mergekit",
                "transformer-lens", "llm-foundry", "mosaicml", "pytest")


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def fingerprint() -> dict[str, Any]:
    packages: dict[str, str] = {}
    for dist in md.distributions():  # in sys.path order: the first one is what imports
        name = dist.metadata["Name"]
        if name:
            packages.setdefault(_norm(name), dist.version)
    freeze = "\n".join(f"{k}=={v}" for k, v in sorted(packages.items()))
    out: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
        "packages": packages,
        "key": {_norm(k): packages[_norm(k)] for k in KEY_PACKAGES if _norm(k) in packages},
        "freeze_sha256": hashlib.sha256(freeze.encode()).hexdigest()[:16],
    }
    if "torch" in packages:
        out["torch"] = _torch()
    return out


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


if __name__ == "__main__":
    json.dump(fingerprint(), sys.stdout, sort_keys=True)

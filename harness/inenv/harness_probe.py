"""Hardware probe, stdlib only: it runs both in the harness and inside environments under test."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import subprocess
from typing import Any

_QUERY = "index,uuid,name,compute_cap,memory.total,driver_version"


def probe_gpus(visible: str | None = None) -> list[dict[str, Any]]:
    """GPUs from nvidia-smi, limited to ``visible`` (a CUDA_VISIBLE_DEVICES value) if given.

    nvidia-smi ignores CUDA_VISIBLE_DEVICES, so the filter is applied here: the probe must
    describe the device the cell was given, not the whole machine."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = [_gpu(line) for line in out.splitlines() if line.strip()]
    if visible is None:
        return gpus
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    return [g for g in gpus if str(g["index"]) in wanted or g["uuid"] in wanted]


def _gpu(line: str) -> dict[str, Any]:
    index, uuid, name, cc, mem, driver = (p.strip() for p in line.split(","))
    major, _, minor = cc.partition(".")
    capability = (int(major), int(minor or 0)) if major.isdigit() else (0, 0)
    return {
        "index": int(index), "uuid": uuid, "name": name,
        "compute_capability": f"{capability[0]}.{capability[1]}",
        "arch": f"sm_{capability[0]}{capability[1]}",
        "memory_mib": int(float(mem)) if mem.replace(".", "").isdigit() else None,
        "driver": driver,
        "fp8": capability >= (8, 9), "bf16": capability >= (8, 0),
    }


def nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


#: Where a CUDA toolkit is when the nvcc on PATH does not say (a wrapper script).
CUDA_ROOTS = ("/usr/local/cuda",)


def cuda_home() -> str | None:
    """The CUDA toolkit's root: ``$CUDA_HOME``, else the toolkit that holds the nvcc on PATH.

    torch guesses the root as nvcc's grandparent folder, which is wrong where ``nvcc`` is a
    wrapper script (``/usr/local/bin/nvcc`` running ``/usr/local/cuda-13.0/bin/nvcc``): it would
    then link JIT extensions against ``/usr/local/lib``. A symlinked nvcc is followed; a script
    cannot be, so then the usual install place is taken. A root is accepted only if it holds
    ``include/cuda_runtime.h``."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    nvcc = shutil.which("nvcc")
    candidates = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] if nvcc else []
    for root in [*candidates, *CUDA_ROOTS]:
        if os.path.exists(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    return None


def probe_host() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": cpu,
            "cpus": os.cpu_count(), "memory_gib": mem_gib}


def probe(visible: str | None = None) -> dict[str, Any]:
    """What a cell runs on: host, the GPUs it may see, and nvcc."""
    return {**probe_host(), "gpus": probe_gpus(visible), "nvcc": nvcc_version()}

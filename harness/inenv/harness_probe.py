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
    """GPUs from NVML or nvidia-smi in PCI bus order, limited to ``visible`` (a
    CUDA_VISIBLE_DEVICES value, which neither honours)."""
    gpus = _nvml_gpus()
    return visible_gpus(_smi_gpus() if gpus is None else gpus, visible)


def visible_gpus(gpus: list[dict[str, Any]], visible: str | None) -> list[dict[str, Any]]:
    """The GPUs a CUDA_VISIBLE_DEVICES value shows, in its order; an unknown entry ends the
    list, as in CUDA."""
    if visible is None:
        return gpus
    out = []
    for entry in (v.strip() for v in visible.split(",")):
        match = [g for g in gpus if entry and (str(g["index"]) == entry
                                               or g["uuid"].startswith(entry))]
        if len(match) != 1:
            break
        out.append(match[0])
    return out


def _nvml_gpus() -> list[dict[str, Any]] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: nvidia-smi can say no more
        return None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        out = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
            out.append(_describe(index, _text(pynvml.nvmlDeviceGetUUID(handle)),
                                 _text(pynvml.nvmlDeviceGetName(handle)), (major, minor),
                                 int(memory), driver))
        return out
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _smi_gpus() -> list[dict[str, Any]]:
    try:  # no nvidia-smi: OSError
        out = subprocess.run(["nvidia-smi", f"--query-gpu={_QUERY}",
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in filter(str.strip, out.splitlines()):
        index, uuid, name, cc, mem, driver = (p.strip() for p in line.split(","))
        major, _, minor = cc.partition(".")
        capability = (int(major), int(minor or 0)) if major.isdigit() else (0, 0)
        memory = int(float(mem)) if mem.replace(".", "").isdigit() else None
        gpus.append(_describe(int(index), uuid, name, capability, memory, driver))
    return gpus


def _describe(index: int, uuid: str, name: str, capability: tuple[int, int],
              memory_mib: int | None, driver: str | None) -> dict[str, Any]:
    return {
        "index": index, "uuid": uuid, "name": name,
        "compute_capability": f"{capability[0]}.{capability[1]}",
        "arch": f"sm_{capability[0]}{capability[1]}",
        "memory_mib": memory_mib, "driver": driver,
        "fp8": capability >= (8, 9), "bf16": capability >= (8, 0),
    }


def nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    try:  # no nvcc: OSError
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


CUDA_ROOTS = ("/usr/local/cuda",)  # where a toolkit is when the nvcc on PATH does not say


def cuda_home() -> str | None:
    """``$CUDA_HOME``, else the root holding the nvcc on PATH (through links) and
    ``include/cuda_runtime.h`` (torch's guess fails on a wrapper), else the usual place."""
    if os.environ.get("CUDA_HOME"):
        return os.environ["CUDA_HOME"]
    nvcc = shutil.which("nvcc")
    candidates = [os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] if nvcc else []
    for root in [*candidates, *CUDA_ROOTS]:
        if os.path.exists(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    return None


def probe(visible: str | None = None) -> dict[str, Any]:
    """What a cell runs on: host, the GPUs it may see, and nvcc."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as fh:
        cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")),
                   cpu)
    mem_gib = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {"platform": platform.platform(), "machine": platform.machine(), "cpu": cpu,
            "cpus": os.cpu_count(), "memory_gib": mem_gib, "gpus": probe_gpus(visible),
            "nvcc": nvcc_version()}

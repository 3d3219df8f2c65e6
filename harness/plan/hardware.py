"""What this machine offers to cells: the CPU and each GPU with its architecture."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from harness.core.errors import UsageError
from harness.core.paths import uv_binary
from harness.inenv import harness_probe


@dataclass(frozen=True, kw_only=True)
class Gpu:
    index: int
    arch: str
    name: str = "unknown"
    compute_capability: str = ""
    memory_mib: int | None = None
    driver: str | None = None

    @property
    def fp8(self) -> bool:
        return _cc(self.compute_capability) >= (8, 9)

    @property
    def bf16(self) -> bool:
        return _cc(self.compute_capability) >= (8, 0)


@dataclass(frozen=True, kw_only=True)
class Machine:
    host: dict[str, Any] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    nvcc: str | None = None

    @property
    def targets(self) -> tuple[str, ...]:
        """What ``auto`` hardware becomes here: the CPU and each GPU architecture."""
        return ("cpu", *sorted({g.arch for g in self.gpus}))

    @property
    def serves(self) -> frozenset[str]:
        """Every target a cell may name and still run here (sm_90a on an sm_90 GPU)."""
        return frozenset(self.targets) | {f"{g.arch}a" for g in self.gpus if has_a_variant(g.arch)}


def has_a_variant(arch: str) -> bool:
    """Architectures with arch-specific ("a") features: Hopper (sm_90) and newer."""
    digits = arch.removeprefix("sm_")
    return digits.isdigit() and int(digits) >= 90


def arch_serves(gpu_arch: str, target: str) -> bool:
    """Can a GPU of ``gpu_arch`` run a cell that targets ``target``? sm_90a runs on sm_90."""
    return target == gpu_arch or (target == f"{gpu_arch}a" and has_a_variant(gpu_arch))


def _cc(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return (int(major), int(minor or 0)) if major.isdigit() else (0, 0)


def probe_machine(gpus: str | None = None) -> Machine:
    """Probe this machine; ``gpus`` overrides the slots: ``0,1`` or ``0:sm_90,1:sm_90``."""
    raw = harness_probe.probe(os.environ.get("CUDA_VISIBLE_DEVICES"))
    found = {g["index"]: Gpu(index=g["index"], arch=g["arch"], name=g["name"],
                             compute_capability=g["compute_capability"],
                             memory_mib=g["memory_mib"], driver=g["driver"])
             for g in raw["gpus"]}
    chosen = tuple(found.values()) if gpus is None else _override(gpus, found)
    return Machine(host={k: raw[k] for k in ("platform", "machine", "cpu", "cpus", "memory_gib")},
                   gpus=chosen, nvcc=raw["nvcc"])


def _override(spec: str, found: dict[int, Gpu]) -> tuple[Gpu, ...]:
    out: list[Gpu] = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        match = re.fullmatch(r"(\d+)(?::sm_(\d{2,3})[a-z]?)?", part)  # sm_90a: sm_90, cc 9.0
        if not match:
            raise UsageError(f"--gpus: {part!r} is not a GPU index (like 0 or 0:sm_90)")
        index, digits = int(match[1]), match[2]
        if index in {g.index for g in out}:
            raise UsageError(f"--gpus: GPU {index} named twice; each GPU is one slot")
        if digits is None:
            if index not in found:
                raise UsageError(f"--gpus: no GPU {index} on this machine; name its "
                                 f"architecture (--gpus {index}:sm_90) to use it anyway")
            out.append(found[index])
            continue
        known = found.get(index)
        out.append(Gpu(index=index, arch=f"sm_{digits}", name=known.name if known else "declared",
                       compute_capability=f"{digits[:-1]}.{digits[-1]}"))
    return tuple(out)


def describe(machine: Machine) -> str:
    """``harness doctor``: this machine's fingerprint, in the spirit of torch's collect_env."""
    import platform
    import shutil
    import subprocess

    def version(cmd: list[str]) -> str:
        if shutil.which(cmd[0]) is None:
            return "not found"
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"error: {exc}"
        text = (out.stdout.strip() or out.stderr.strip() or "?").splitlines()
        return text[0] if out.returncode == 0 else f"unavailable ({text[-1][:80]})"

    lines = [
        f"Platform:  {machine.host.get('platform')}",
        f"CPU:       {machine.host.get('cpu')} ({machine.host.get('cpus')} cores)",
        f"Memory:    {machine.host.get('memory_gib')} GiB",
        f"Python:    {platform.python_version()} ({sys.executable})",
        f"uv:        {version([uv_binary() or 'uv', '--version'])}",  # as environments find it
        f"docker:    {version(['docker', 'version', '--format', '{{.Server.Version}}'])}",
        f"nvcc:      {machine.nvcc or 'not found'}",
        f"GPUs:      {len(machine.gpus) or 'none'}",
    ]
    for gpu in machine.gpus:
        lines.append(f"  [{gpu.index}] {gpu.name}  cc {gpu.compute_capability} ({gpu.arch})  "
                     f"{gpu.memory_mib} MiB  driver {gpu.driver}  fp8={'yes' if gpu.fp8 else 'no'}"
                     f"  bf16={'yes' if gpu.bf16 else 'no'}")
    lines.append("Targets:   " + ", ".join(machine.targets))
    lines.append("Ray node:  " + ray_start_line(machine))
    return "\n".join(lines)


def ray_start_line(machine: Machine) -> str:
    """How this machine joins a Ray cluster so that ``--executor ray`` can place cells on it."""
    import json
    from collections import Counter

    arches = Counter(g.arch for g in machine.gpus)
    extra = (f" --num-gpus {len(machine.gpus)} --resources '{json.dumps(dict(arches))}'"
             if machine.gpus else "")
    return f"ray start --address HEAD:6379{extra}"

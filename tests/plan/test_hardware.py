"""GPU probing that tells the truth on mixed hosts: visible devices, order, sm_90a."""

from __future__ import annotations

from typing import Any

import pytest

from harness.core.errors import UsageError
from harness.core.matrix import EnvSpec
from harness.inenv import harness_probe
from harness.inenv.harness_probe import visible_gpus
from harness.plan.cases import CaseVariant
from harness.plan.cells import Cell
from harness.plan.hardware import Gpu, Machine, arch_serves, probe_machine
from harness.run.scheduler import make_slots

# Two GPUs as nvidia-smi / NVML report them: PCI bus order.
GPUS: list[dict[str, Any]] = [
    {"index": 0, "uuid": "GPU-a1b2c3d4-0000", "arch": "sm_80"},
    {"index": 1, "uuid": "GPU-e5f6a7b8-1111", "arch": "sm_90"},
]


@pytest.mark.parametrize(("visible", "indices"), [
    (None, [0, 1]), ("", []), ("1", [1]), ("1,0", [1, 0]), ("GPU-e5f6", [1]),
    ("0,7,1", [0]),  # CUDA stops at the first entry it does not know
])
def test_the_probe_sees_what_cuda_visible_devices_lets_a_process_see(
        visible: str | None, indices: list[int]) -> None:
    assert [g["index"] for g in visible_gpus(GPUS, visible)] == indices


def test_the_harness_probes_only_the_devices_it_was_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str | None] = []

    def probe(visible: str | None = None) -> dict[str, Any]:
        asked.append(visible)
        return {"platform": "", "machine": "", "cpu": "", "cpus": 2, "memory_gib": 1,
                "gpus": [{**g, "name": "x", "compute_capability": g["arch"][3] + "." +
                          g["arch"][4], "memory_mib": 1, "driver": "1"}
                         for g in visible_gpus(GPUS, visible)], "nvcc": None}

    monkeypatch.setattr(harness_probe, "probe", probe)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-e5f6a7b8-1111")
    assert [(g.index, g.arch) for g in probe_machine().gpus] == [(1, "sm_90")]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [g.index for g in probe_machine().gpus] == [0, 1]
    assert asked == ["GPU-e5f6a7b8-1111", None]


def test_sm_90a_cells_run_on_an_sm_90_gpu_and_nowhere_else() -> None:
    assert arch_serves("sm_90", "sm_90a") and arch_serves("sm_90", "sm_90")
    assert not arch_serves("sm_80", "sm_80a") and not arch_serves("sm_89", "sm_90a")
    machine = Machine(gpus=(Gpu(index=0, arch="sm_90"), Gpu(index=1, arch="sm_80")))
    assert machine.targets == ("cpu", "sm_80", "sm_90")  # what `auto` expands to
    assert machine.serves == {"cpu", "sm_80", "sm_90", "sm_90a"}
    env = EnvSpec(name="e", origin="t", values=(), backend="uv", python="3.11",
                  requirements=(), pins=())
    case = CaseVariant(case_id="c", variant="v", nodeid="test_c.py::test_v")
    cell = Cell(cell_id="x", env=env, case=case, hardware="sm_90a")
    slots = make_slots(1, [(0, "sm_90"), (1, "sm_80")])
    assert [s.name for s in slots if s.fits(cell)] == ["gpu0"]


def test_a_gpu_declared_as_sm_90a_is_a_cc_9_0_gpu_that_serves_sm_90a() -> None:
    from harness.plan.hardware import _override

    (gpu,) = _override("3:sm_90a", {})
    assert (gpu.index, gpu.arch, gpu.compute_capability, gpu.fp8) == (3, "sm_90", "9.0", True)
    assert "sm_90a" in Machine(gpus=(gpu,)).serves


@pytest.mark.parametrize("spec", ["0:sm_90,0:sm_80", "1:sm_90, 1:sm_90"])
def test_a_gpu_named_twice_is_refused(spec: str) -> None:
    """It made two slots on one GPU: two cells at once where each should have it alone."""
    from harness.plan.hardware import _override

    with pytest.raises(UsageError, match=r"^--gpus: GPU \d named twice; each GPU is one slot$"):
        _override(spec, {})


def test_doctor_prints_how_a_node_joins_a_ray_cluster() -> None:
    from harness.plan.hardware import ray_start_line

    machine = Machine(gpus=(Gpu(index=0, arch="sm_90"), Gpu(index=1, arch="sm_90"),
                            Gpu(index=2, arch="sm_80")))
    assert ray_start_line(machine) == (
        """ray start --address HEAD:6379 --num-gpus 3 --resources '{"sm_90": 2, "sm_80": 1}'""")
    assert ray_start_line(Machine()) == "ray start --address HEAD:6379"

"""The local executor: this machine's slots, a batch per slot, futures that resolve per cell."""

from __future__ import annotations

import time
from concurrent.futures import wait
from pathlib import Path

from harness.core.results import Outcome
from harness.matrix.load import parse_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import Cell, make_plan
from harness.plan.hardware import Gpu, Machine
from harness.run.executors.local import LocalExecutor
from tests.conftest import DATA, PY

CASES = DATA / "behaviour"


def cells(tmp_path: Path, *variants: str) -> list[Cell]:
    spec = parse_matrix(f"version: 1\ncases_dir: {CASES}\ndefaults: {{timeout: 120}}\n"
                        f"environments:\n  host: {{backend: host, python: '{PY}'}}\n",
                        file="m.yaml", base=tmp_path)
    by_variant = {c.case.variant: c for c in make_plan(spec, collect_cases(CASES), ("cpu",)).cells}
    return [by_variant[v] for v in variants]


def executor(tmp_path: Path, jobs: int, machine: Machine | None = None) -> LocalExecutor:
    return LocalExecutor(machine or Machine(), jobs=jobs, cache_dir=tmp_path / "cache",
                         cases_dir=CASES)


def test_capacity_and_targets_come_from_the_slots_and_the_gpus(tmp_path: Path) -> None:
    gpus = (Gpu(index=0, name="H100", arch="sm_90", compute_capability="9.0", memory_mib=81559),)
    local = executor(tmp_path, 2, Machine(gpus=gpus))
    try:
        assert local.capacity == 3  # two CPU slots and the GPU's
        assert local.targets == ("cpu", "sm_90") and "sm_90a" in local.serves
        assert [s["gpu"] for s in local.describe()["slots"]] == [None, None, 0]  # type: ignore[index]
    finally:
        local.shutdown()


def test_a_batch_runs_in_one_slot_and_each_future_is_its_cell(tmp_path: Path) -> None:
    local = executor(tmp_path, 1)
    try:
        batch = cells(tmp_path, "pass", "reproduces")
        futures = local.submit(batch, run_id="r")
        done, _ = wait(futures, timeout=120)
        runs = [f.result() for f in futures]
        assert len(done) == 2
        assert [r.result.cell_id for r in runs] == [c.cell_id for c in batch]
        assert [r.result.outcome for r in runs] == [Outcome.PASS, Outcome.REPRODUCED]
        assert runs[0].log_name == runs[1].log_name  # one process, one log
    finally:
        local.shutdown()


def test_shutdown_with_cancel_kills_what_runs_and_cancels_what_waits(tmp_path: Path) -> None:
    local = executor(tmp_path, 1)
    hang, waiting = cells(tmp_path, "hang", "pass")
    running = local.submit([hang], run_id="r")[0]
    queued = local.submit([waiting], run_id="r")[0]
    time.sleep(3)  # the hanging case has started
    started = time.monotonic()
    local.shutdown(cancel=True)
    assert time.monotonic() - started < 60  # killed, not waited for its 600 s
    assert queued.cancelled()
    assert running.cancelled() or running.done()

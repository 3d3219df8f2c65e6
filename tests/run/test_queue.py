"""Cells drawn from one queue by several pytest processes (``run.queue``): the claims, two
batches sharing a queue through real processes, the local executor's ``draws``."""

from __future__ import annotations

import tempfile
import threading
import time
from concurrent.futures import wait
from pathlib import Path

from harness.core.results import CellRun, Outcome
from harness.envs.host import HostBackend
from harness.matrix.load import parse_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import Cell, make_plan
from harness.plan.hardware import Machine
from harness.run.cell import iter_batch
from harness.run.executors.local import LocalExecutor
from harness.run.queue import CellQueue
from harness.run.supervise import EnvCache
from tests.conftest import DATA, PY

BEHAVIOUR = DATA / "behaviour"

# Whichever process takes test_first holds it until the other has claimed a case: the test
# knows both drew, whatever the machine's speed.
SHARED = '''
import os
import time

def test_first(request):
    folder = request.config.getoption("--harness-queue")
    deadline = time.time() + 60
    while len(os.listdir(folder)) < 2 and time.time() < deadline:
        time.sleep(0.05)

def test_second():
    time.sleep(0.2)

def test_third():
    time.sleep(0.2)

def test_fourth():
    time.sleep(0.2)
'''


def plan(tmp_path: Path, cases: Path, *variants: str, timeout: float = 60) -> list[Cell]:
    spec = parse_matrix(f"version: 1\ncases_dir: {cases}\ndefaults: {{timeout: {timeout}}}\n"
                        f"environments:\n  host: {{backend: host, python: '{PY}'}}\n",
                        file="m.yaml", base=tmp_path)
    by_variant = {c.case.variant: c for c in make_plan(spec, collect_cases(cases), ("cpu",)).cells}
    return [by_variant[v] for v in variants]


def shared_cases(tmp_path: Path) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    (cases / "test_shared.py").write_text(SHARED)
    return cases


def test_a_cell_is_claimed_once_and_given_back_when_never_reached(tmp_path: Path) -> None:
    cells = plan(tmp_path, BEHAVIOUR, "pass", "reproduces", "other_error")
    queue = CellQueue(cells[0].cell_id, tmp_path)
    one, two = queue.drawer(), queue.drawer()
    assert one.token != two.token and queue.open(cells)
    assert one.take(cells[0]) and not two.take(cells[0])
    assert one.owner(cells[0]) == one.token and two.owner(cells[1]) is None
    assert one.open(cells) == cells[1:] and one.held(cells) == [cells[0]] and not two.held(cells)
    assert two.take_open(cells) == cells[1:]  # what is left, claimed; not what one holds
    assert not queue.open(cells)
    one.release([cells[0]])
    assert two.open(cells) == [cells[0]]
    queue.remove()
    assert not queue.folder.exists()


def test_two_batches_drawing_from_one_queue_run_each_cell_once(tmp_path: Path) -> None:
    """Real processes, one a crash: each cell settles exactly once, by whichever batch ran
    it, and the crash costs only its own cell (a fresh process draws the rest)."""
    cells = plan(tmp_path, BEHAVIOUR, "pass", "segfault", "reproduces", "os_exit",
                 "other_error", "wait_a", "wait_b")
    queue = CellQueue(cells[0].cell_id, tmp_path)
    backend, envs = HostBackend(tmp_path / "cache"), EnvCache()
    runs: dict[int, list[CellRun]] = {0: [], 1: []}

    def batch(n: int) -> None:
        runs[n] = list(iter_batch(cells, backend, None, cases_dir=BEHAVIOUR, envs=envs,
                                  queue=queue))

    threads = [threading.Thread(target=batch, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    got = [r.result for rs in runs.values() for r in rs]
    assert sorted(r.cell_id for r in got) == sorted(c.cell_id for c in cells)
    assert {r.variant: r.outcome for r in got} == {
        "pass": "PASS", "segfault": "CRASH", "reproduces": "REPRODUCED", "os_exit": "CRASH",
        "other_error": "FAIL", "wait_a": "PASS", "wait_b": "PASS"}
    # Every claim is the token of a batch; nothing is left unclaimed.
    assert not queue.open(cells)
    logs = {r.log_name for rs in runs.values() for r in rs}
    assert len(logs) >= 3  # a process per crash at least, each with its own log


def test_the_local_executor_resolves_each_future_by_whichever_process_ran_it(
        tmp_path: Path) -> None:
    cases = shared_cases(tmp_path)
    cells = plan(tmp_path, cases, "first", "second", "third", "fourth")
    local = LocalExecutor(Machine(), jobs=2, cache_dir=tmp_path / "cache", cases_dir=cases)
    try:
        futures = local.submit(cells, run_id="r", draws=2)
        done, _ = wait(futures, timeout=120)
        assert len(done) == 4
        runs = [f.result() for f in futures]
        assert [r.result.cell_id for r in runs] == [c.cell_id for c in cells]
        assert all(r.result.outcome == Outcome.PASS for r in runs)
        pids = {next(e["pid"] for e in r.events if e["event"] == "session") for r in runs}
        assert len(pids) == 2  # two processes drew from the queue
        assert len({r.log_name for r in runs}) == 2  # each its own log
    finally:
        local.shutdown()
    # The queue's folder went with its last task.
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-cell-{cells[0].cell_id}-queue*"))
    assert not local._drawing


def test_cancelling_a_queue_half_started_leaves_no_future_pending_and_no_folder(
        tmp_path: Path) -> None:
    """One slot: one task of the queue runs (a hang), the other waits; Ctrl-C cancels both,
    and the futures the waiting task shared with the running one are cancelled once."""
    cells = plan(tmp_path, BEHAVIOUR, "hang", "pass", timeout=300)
    local = LocalExecutor(Machine(), jobs=1, cache_dir=tmp_path / "cache", cases_dir=BEHAVIOUR)
    futures = local.submit(cells, run_id="r", draws=2)
    deadline = time.monotonic() + 60
    while not list(Path(tempfile.gettempdir()).glob(f"harness-cell-{cells[0].cell_id}-queue*/*")
                   ) and time.monotonic() < deadline:
        time.sleep(0.1)  # until the hang is claimed: its process runs
    local.shutdown(cancel=True)
    assert all(f.done() for f in futures)
    assert all(f.cancelled() for f in futures)
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-cell-{cells[0].cell_id}-queue*"))
    assert not local._drawing

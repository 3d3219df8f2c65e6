"""Cells drawn from one queue by several pytest processes (``run.queue``): the claims, two
batches sharing a queue through real processes, the local executor's ``draws``."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from concurrent.futures import wait
from pathlib import Path

from harness.core.reaper import SCRATCH
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
    # Three claims: this case, the one this process holds next, one of the other's.
    while len(os.listdir(folder)) < 3 and time.time() < deadline:
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
    queue = CellQueue(cells, 2, tmp_path)
    one, two = queue.drawer(), queue.drawer()
    assert one.token != two.token and queue.open() == cells
    assert one.take(cells[0]) and not two.take(cells[0])
    assert one.owner(cells[0]) == one.token and two.owner(cells[1]) is None
    assert queue.open() == cells[1:] and one.held() == [cells[0]] and not two.held()
    one.done.add(cells[0].cell_id)  # its process settled it
    assert one.held() == [] and one.claimed() == [cells[0]]
    assert two.take_open() == cells[1:]  # what is left, claimed; not what one holds
    assert not queue.open()
    two.done.add(cells[1].cell_id)
    two.release()  # claimed, never reached: back to the queue
    assert queue.open() == [cells[2]]
    # A killed harness's queue is swept with its cells' scratch folders (by its maker's pid).
    made_by = SCRATCH.match(queue.folder.name)
    assert made_by is not None and made_by.group(1) == str(os.getpid())
    queue.remove()
    assert not queue.folder.exists()


def test_a_task_whose_process_runs_nothing_gives_up_one_cell_unless_it_is_the_last(
        tmp_path: Path) -> None:
    cells = plan(tmp_path, BEHAVIOUR, "pass", "reproduces", "other_error", "os_exit")
    queue = CellQueue(cells, 3, tmp_path)
    one, two, three = queue.drawer(), queue.drawer(), queue.drawer()
    assert two.take(cells[0])
    assert two.give_up() == [cells[0]] and two.left  # what it claimed, and no more
    assert one.give_up() == [cells[1]]  # nothing claimed: one open cell, to show why
    assert queue.open() == cells[2:]  # the rest stays for the task still drawing
    assert not one.leave()  # it left once already
    assert three.take(cells[2])
    three.done.add(cells[2].cell_id)  # one of its processes ran it
    assert three.give_up() == [cells[3]]  # the last settles what is left, not what it ran
    assert not queue.open()
    assert sorted(p.name for p in queue.folder.iterdir()) == sorted(c.cell_id for c in cells)


def test_two_batches_drawing_from_one_queue_run_each_cell_once(tmp_path: Path) -> None:
    """Real processes, one a crash: each cell settles exactly once, by whichever batch ran
    it, and the crash costs only its own cell (a fresh process draws the rest)."""
    cells = plan(tmp_path, BEHAVIOUR, "pass", "segfault", "reproduces", "os_exit",
                 "other_error", "wait_a", "wait_b")
    queue = CellQueue(cells, 2, tmp_path)
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
    assert not queue.open()
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
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-cell-{cells[0].cell_id}-*queue-*"))
    assert not local._futures and not local._failures  # nothing of the queue kept


def test_cancelling_a_queue_half_started_leaves_no_future_pending_and_no_folder(
        tmp_path: Path) -> None:
    """One slot: one task of the queue runs (a hang), the other waits; Ctrl-C cancels both,
    and the futures the waiting task shared with the running one are cancelled once."""
    cells = plan(tmp_path, BEHAVIOUR, "hang", "pass", timeout=300)
    local = LocalExecutor(Machine(), jobs=1, cache_dir=tmp_path / "cache", cases_dir=BEHAVIOUR)
    futures = local.submit(cells, run_id="r", draws=2)
    claims = f"harness-cell-{cells[0].cell_id}-*queue-*/*"
    deadline = time.monotonic() + 60
    while not list(Path(tempfile.gettempdir()).glob(claims)) and time.monotonic() < deadline:
        time.sleep(0.1)  # until the hang is claimed: its process runs
    assert list(Path(tempfile.gettempdir()).glob(claims)), "no process claimed a cell"
    local.shutdown(cancel=True)
    assert all(f.done() for f in futures)
    assert all(f.cancelled() for f in futures)
    assert not list(Path(tempfile.gettempdir()).glob(f"harness-cell-{cells[0].cell_id}-*queue-*"))
    assert not local._futures and not local._failures  # nothing of the queue kept


DESELECTING = """
import os

def pytest_collection_modifyitems(config, items):
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":  # a conftest that drops its GPU tests
        gone = [i for i in items if "gpu" in i.name]
        items[:] = [i for i in items if i not in gone]
        config.hook.pytest_deselected(items=gone)
"""


def test_a_case_pytest_does_not_collect_is_settled_not_drawn_forever(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    (cases / "conftest.py").write_text(DESELECTING)
    (cases / "test_m.py").write_text("def test_a():\n    pass\n\n\ndef test_gpu():\n    pass\n")
    cells = plan(tmp_path, cases, "a", "gpu")
    runs = list(iter_batch(cells, HostBackend(tmp_path / "cache"), None, cases_dir=cases,
                           queue=CellQueue(cells, 1, tmp_path)))
    got = {r.result.variant: r.result for r in runs}
    assert sorted(got) == ["a", "gpu"] and got["a"].outcome == "PASS"
    assert got["gpu"].outcome == "ERROR"
    assert got["gpu"].reason.startswith("pytest exited 0 before the case started")
    assert "deselected" in got["gpu"].reason


def test_a_process_that_cannot_start_leaves_the_open_cells_to_the_one_that_runs(
        tmp_path: Path) -> None:
    """The second process's conftest fails (an import that runs out of memory, a bad GPU)
    while cells are still open: it settles one cell with that error and its task stops; the
    first process runs the rest. (Markers order the two: the first holds its case until the
    second has started, and its later cases until the error is recorded.)"""
    marks = tmp_path / "marks"
    marks.mkdir()
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    (cases / "test_m.py").write_text(f"""
import os
import time

def until(name):
    deadline = time.time() + 60
    while not os.path.exists(os.path.join({str(marks)!r}, name)) and time.time() < deadline:
        time.sleep(0.05)
""" + "\n\ndef test_0():\n    until('second-started')\n" + "".join(
        f"\n\ndef test_{i}():\n    until('error-seen')\n" for i in range(1, 6)))
    cells = plan(tmp_path, cases, *(str(i) for i in range(6)))
    # Written once the cells are planned (planning collects the cases).
    (cases / "conftest.py").write_text(f"""
import os
import time

marks = {str(marks)!r}
try:
    os.close(os.open(os.path.join(marks, "first"), os.O_CREAT | os.O_EXCL))
except FileExistsError:
    open(os.path.join(marks, "second-started"), "w").close()
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(marks, "one-ran")) and time.time() < deadline:
        time.sleep(0.05)
    raise RuntimeError("this process cannot start")
""")
    queue = CellQueue(cells, 2, tmp_path)
    backend, envs = HostBackend(tmp_path / "cache"), EnvCache()
    runs: dict[int, list[CellRun]] = {0: [], 1: []}

    def batch(n: int) -> None:
        for run in iter_batch(cells, backend, None, cases_dir=cases, envs=envs, queue=queue):
            (marks / ("error-seen" if run.result.outcome == "ERROR" else "one-ran")).touch()
            runs[n].append(run)

    threads = [threading.Thread(target=batch, args=(n,)) for n in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    outcomes = sorted(str(r.result.outcome) for rs in runs.values() for r in rs)
    assert outcomes == ["ERROR"] + ["PASS"] * 5  # one cell shows the failure; five ran
    (error,) = (r.result for rs in runs.values() for r in rs if r.result.outcome == "ERROR")
    assert "this process cannot start" in error.reason

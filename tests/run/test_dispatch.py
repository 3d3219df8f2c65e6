"""Real processes through the whole run: the host backend runs the cases in tests/data/behaviour."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from harness.core.matrix import EnvSpec
from harness.plan.cases import CaseVariant
from harness.plan.cells import Cell
from tests.conftest import DATA, ROOT, ctrl_c_reaches, record_lines, report_dir, write_matrix
from tests.run.suite_matrix import host_suite

HOST_ENVS = "\n".join(
    f"  host{i}: {{backend: host, hardware: [@HW@]}}" for i in range(1, 5))


def matrix(tmp_path: Path, envs: int = 1, hardware: str = "cpu", timeout: float = 5) -> Path:
    body = (f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
            f"defaults: {{python: '@PY@', timeout: {timeout}}}\nenvironments:\n"
            + "\n".join(HOST_ENVS.splitlines()[:envs]).replace("@HW@", hardware) + "\n")
    return write_matrix(tmp_path / "matrix.yaml", body)


def harness(tmp_path: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kw.pop("env", {})}  # type: ignore[dict-item]
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           *args], cwd=tmp_path, capture_output=True, text=True, env=env,
                          check=False, timeout=300)


def results(tmp_path: Path) -> list[dict[str, object]]:
    (run,) = (tmp_path / "r" / "runs").iterdir()
    return record_lines(run)


def by_variant(rows: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {r["variant"]: r for r in rows}


def test_crash_hang_and_exit_do_not_lose_other_results(tmp_path: Path) -> None:
    m = matrix(tmp_path, timeout=3)
    proc = harness(tmp_path, "run", "-m", str(m), "-j", "2", "-k",
                   "test_behaviour.py::test_[pshro]*")
    got = by_variant(results(tmp_path))
    outcomes = {k: v["outcome"] for k, v in got.items()}
    assert outcomes == {"pass": "PASS", "reproduces": "REPRODUCED", "other_error": "FAIL",
                        "segfault": "CRASH", "hang": "TIMEOUT", "os_exit": "CRASH"}, proc.stderr
    assert got["segfault"]["reason"] == "process killed by SIGSEGV"
    assert got["os_exit"]["reason"] == "process exited with code 3 in the middle of the case"
    assert str(got["hang"]["reason"]).startswith("no result after 3 s")
    assert proc.returncode == 1
    table = (report_dir(tmp_path / "r") / "compat.md").read_text()
    assert "💥 CRASH" in table and "⏱️ TIMEOUT" in table and "🐞 REPRODUCED" in table


def test_exit_code_zero_when_all_ran_cells_pass_reproduce_or_skip(tmp_path: Path) -> None:
    proc = harness(tmp_path, "run", "-m", str(matrix(tmp_path)), "-k", "test_pass")
    assert proc.returncode == 0, proc.stderr
    proc = harness(tmp_path, "run", "-m", str(matrix(tmp_path)), "-k", "test_reproduces")
    assert proc.returncode == 0, proc.stderr


def test_gpu_cells_never_share_a_gpu(tmp_path: Path) -> None:
    log = tmp_path / "gpu.jsonl"
    m = matrix(tmp_path, envs=4, hardware="sm_90")
    proc = harness(tmp_path, "run", "-m", str(m), "--gpus", "0:sm_90,1:sm_90", "--jobs", "2",
                   "-k", "gpu_log",
                   env={"GPU_LOG": str(log), "HARNESS_PASS_ENV": "GPU_LOG"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 4 and {entry["gpu"] for entry in lines} <= {"0", "1"}
    per_gpu: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for entry in lines:
        per_gpu[entry["gpu"]].append((entry["start"], entry["end"]))
    for spans in per_gpu.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    # Both GPUs were used at once: the cells really ran in parallel.
    assert len(per_gpu) == 2


def test_gpu_cells_are_not_run_without_that_gpu(tmp_path: Path) -> None:
    proc = harness(tmp_path, "run", "-m", str(matrix(tmp_path, hardware="sm_90")), "-k",
                   "test_pass")
    (row,) = results(tmp_path)
    assert row["outcome"] == "NOT_RUN" and "needs sm_90" in str(row["reason"])
    assert proc.returncode == 0


def test_kill_9_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    m = matrix(tmp_path, envs=2)
    args = [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
            str(m), "-j", "1", "-k", "wait_"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    victim = subprocess.Popen(args, cwd=tmp_path, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runs = list((tmp_path / "r" / "runs").glob("*/results.jsonl"))
        if runs and len(runs[0].read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    before = results(tmp_path)
    assert 3 <= len(before) < 8
    proc = harness(tmp_path, "run", "-m", str(m), "-j", "1", "-k", "wait_", "--resume",
                   "latest")
    assert proc.returncode == 0, proc.stderr
    after = results(tmp_path)
    ids = [r["cell_id"] for r in after]
    assert len(ids) == len(set(ids)) == 8
    assert {r["cell_id"] for r in before} <= set(ids)
    assert all(r["outcome"] == "PASS" for r in after)


def test_resume_runs_what_the_runs_own_plan_lacks_not_the_command_lines(
        tmp_path: Path) -> None:
    """A resume without the run's -k ran every case of the matrix into the slice's run."""
    m = matrix(tmp_path, timeout=3)
    assert harness(tmp_path, "run", "-m", str(m), "-k", "test_pass").returncode == 0
    proc = harness(tmp_path, "run", "-m", str(m), "--resume", "latest")
    assert proc.returncode == 0, proc.stderr
    assert "1 cells done, 0 to run" in proc.stdout, proc.stdout
    assert [r["variant"] for r in results(tmp_path)] == ["pass"]


def test_ctrl_c_kills_children_and_exits_130(tmp_path: Path) -> None:
    m = matrix(tmp_path, timeout=300)
    args = [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
            str(m), "-k", "test_hang"]
    scratch = tmp_path / "scratch"  # where cells keep their events while they run
    scratch.mkdir()
    proc = subprocess.Popen(args, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT),
                                                     "TMPDIR": str(scratch)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_reaches)
    deadline = time.monotonic() + 60
    child_pid = None
    while time.monotonic() < deadline and child_pid is None:
        for events in scratch.glob("harness-cell-*/events.jsonl"):
            for line in events.read_text().splitlines():
                event = json.loads(line)
                if event["event"] == "start":
                    child_pid = next(json.loads(x)["pid"] for x in
                                     events.read_text().splitlines() if '"session"' in x)
        time.sleep(0.05)
    assert child_pid is not None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    time.sleep(0.2)
    assert not Path(f"/proc/{child_pid}").exists() or "Z" in Path(
        f"/proc/{child_pid}/stat").read_text().split()[2]
    assert not list(scratch.iterdir())  # the cell's scratch folder went with it


def test_a_failed_build_is_counted_as_failed_not_as_nothing_to_build(tmp_path: Path) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        "defaults: {timeout: 30}\nenvironments:\n"
        "  good: {backend: host, python: '@PY@'}\n"
        "  broken: {backend: host, python: '2.7'}\n"))
    proc = harness(tmp_path, "run", "-m", str(m), "-k", "test_pass")
    assert "environments: 0 built, 1 reused, 1 failed" in proc.stdout, proc.stdout
    assert "nothing to build" not in proc.stdout
    broken = next(r for r in results(tmp_path) if r["environment"] == "broken")
    assert broken["outcome"] == "ERROR" and "asked Python 2.7" in str(broken["reason"])


def test_longest_expected_batches_go_first() -> None:
    from harness.run.dispatch import order_batches

    cells = [Cell(cell_id=i, env=None, case=None, hardware="cpu")  # type: ignore[arg-type]
             for i in "abcd"]
    order = order_batches([([c], 1) for c in cells], {"a": 1.0, "b": 30.0, "c": 5.0})
    assert [b[0][0].cell_id for b in order] == ["d", "b", "c", "a"]  # never timed: first


def cell(env: str, variant: str, module: str = "test_a.py", isolate: bool = False) -> Cell:
    """A planned cell of no real case (what the driver cuts into batches)."""
    spec = EnvSpec(name=env, origin="t", values=(), backend="host", python="3.11",
                   requirements=(), pins=())
    case = CaseVariant(case_id=module, variant=variant, nodeid=f"{module}::{variant}",
                       isolate=isolate)
    return Cell(cell_id=f"{env}-{module}-{variant}", env=spec, case=case, hardware="cpu")


def test_batches_group_a_module_per_environment_and_fill_the_slots() -> None:
    from harness.run.dispatch import make_batches

    plan = [cell("e1", v) for v in "abcd"] + [cell("e2", "a"), cell("e1", "x", "test_b.py"),
                                              cell("e1", "fp8", isolate=True)]
    one_slot = make_batches(plan, capacity=1)
    assert [[c.case.variant for c in b] for b in one_slot] == [
        ["a", "b", "c", "d"], ["a"], ["x"], ["fp8"]]
    six = make_batches(plan, capacity=6)
    assert sorted(len(b) for b in six) == [1, 1, 1, 1, 1, 2]  # the big group split until 6
    assert make_batches(plan, capacity=1, batch=False) == [[c] for c in plan]


def test_timed_batches_share_the_work_evenly_and_none_is_empty() -> None:
    from harness.run.dispatch import make_batches

    plan = [cell("e1", v) for v in "abcd"]
    expected = {c.cell_id: t for c, t in zip(plan, (6.0, 3.0, 2.0, 1.0), strict=True)}
    halves = make_batches(plan, capacity=2, expected=expected)
    assert [[c.case.variant for c in b] for b in halves] == [["a"], ["b", "c", "d"]]
    instant = make_batches(plan, capacity=4, expected=dict.fromkeys(expected, 0.0))
    assert all(instant) and sorted(c.case.variant for b in instant for c in b) == list("abcd")


def test_the_driver_gives_a_queue_to_the_slots_a_first_run_would_leave_idle() -> None:
    from harness.run.dispatch import make_queues

    cells = [cell("e1", v) for v in "abcdef"] + [cell("e2", "a"), cell("e1", "x", isolate=True)]
    units = make_queues(cells, capacity=4)
    assert [([c.case.variant for c in g], d) for g, d in units] == [
        (list("abcdef"), 2), (["a"], 1), (["x"], 1)]  # 2 + 1 + 1 processes: every slot
    assert [d for _, d in make_queues(cells, capacity=20)] == [6, 1, 1]  # one per cell at most
    # With durations known: as many processes as an even share of the work asks (10 s of
    # 12 on 4 slots: 4), the longest cells first.
    expected = {c.cell_id: 1.0 for c in cells} | {"e1-test_a.py-f": 5.0}
    (group, draws), *_ = make_queues(cells, capacity=4, expected=expected)
    assert draws == 4 and group[0].case.variant == "f"
    # Cells only one slot can run (a GPU's) get one process, whatever the capacity.
    assert [d for _, d in make_queues(cells, capacity=8, fits=lambda c: 1)] == [1, 1, 1]


def test_variable_axes_reach_the_case_and_the_table(tmp_path: Path) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        "matrices:\n  host:\n    backend: host\n    python: '@PY@'\n"
        "    axes: {init_device: [cpu, meta]}\n"))
    proc = harness(tmp_path, "run", "-m", str(m), "-k", "test_variables")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {r["environment"]: r["details"] for r in results(tmp_path)}
    assert got == {
        "host:init_device=cpu": {"variables": {"init_device": "cpu"}, "init_device": "cpu"},
        "host:init_device=meta": {"variables": {"init_device": "meta"}, "init_device": "meta"}}
    csv = (report_dir(tmp_path / "r") / "compat.csv").read_text()
    assert "axis:init_device" in csv.splitlines()[0] and ",meta" in csv


def test_a_cell_that_fails_then_passes_is_flaky(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        "environments:\n  host: {backend: host, python: '@PY@', retries: 1}\n"))
    proc = harness(tmp_path, "run", "-m", str(m), "-k",
                   "test_behaviour.py::test_[fo]*",  # flaky_once, other_error, os_exit
                   env={"FLAKY_FLAG": str(tmp_path / "flag"), "HARNESS_PASS_ENV": "FLAKY_FLAG"})
    assert proc.returncode == 1, proc.stdout + proc.stderr  # other_error stays a FAIL
    final = {r["variant"]: r for r in results(tmp_path)}  # the last record of each cell
    assert final["flaky_once"]["outcome"] == "FLAKY" and final["flaky_once"]["attempt"] == 2
    assert final["flaky_once"]["reason"].startswith(
        "PASS on attempt 2 after FAIL on attempt 1: AssertionError: first try fails")
    assert final["other_error"]["outcome"] == "FAIL" and final["other_error"]["attempt"] == 2
    assert final["os_exit"]["outcome"] == "CRASH" and final["os_exit"]["attempt"] == 2
    assert "🎲 FLAKY" in (report_dir(tmp_path / "r") / "compat.md").read_text()
    suite = ET.parse(report_dir(tmp_path / "r") / "junit.xml").getroot()
    flaky = next(c for c in suite if c.get("name") == "behaviour::flaky_once")
    props = {p.get("name"): p.get("value") for p in flaky.iter("property")}
    assert props["outcome"] == "FLAKY" and not list(flaky.iter("failure"))


def test_a_case_may_declare_its_own_retries(tmp_path: Path) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'retrying'}\n"
        "environments:\n  host: {backend: host, python: '@PY@'}\n"))
    proc = harness(tmp_path, "run", "-m", str(m),
                   env={"FLAKY_FLAG": str(tmp_path / "flag"), "HARNESS_PASS_ENV": "FLAKY_FLAG"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    final = results(tmp_path)[-1]
    assert (final["outcome"], final["attempt"]) == ("FLAKY", 2)
    assert "(1 of 1 retries)" in proc.stdout + proc.stderr


def test_a_suites_tests_are_on_disk_as_they_end_and_survive_kill_9(tmp_path: Path) -> None:
    """The harness killed in the middle of a suite keeps each test that ended, with a log;
    ``--resume`` runs only the tests left, and the session counts the kept one."""
    m = host_suite(tmp_path, {"test_s.py": (
        "import time\n\ndef test_quick():\n    print('quick ran')\n\n"
        "def test_slow():\n    time.sleep(120)\n")}, args="-s", timeout=300)
    suite = tmp_path / "suite"
    victim = subprocess.Popen(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
         str(m)], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 100
    rows: list[dict[str, object]] = []
    while time.monotonic() < deadline and not rows:
        if list((tmp_path / "r" / "runs").glob("*/results.jsonl")):
            rows = results(tmp_path)
        time.sleep(0.1)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    assert [(r["variant"], r["outcome"]) for r in rows] == [("test_s.py::test_quick", "PASS")]
    (run_dir,) = (tmp_path / "r" / "runs").iterdir()
    assert "quick ran" in (run_dir / str(rows[0]["log"])).read_text()

    (suite / "test_s.py").write_text(  # test_quick would fail now: it must not run again
        "def test_quick():\n    raise AssertionError('ran twice')\n\n"
        "def test_slow():\n    print('slow ran')\n")
    resumed = subprocess.run(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m",
         str(m), "--resume", "latest"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "0 cells done, 1 to run (suites cut short: 1 recorded tests kept" in resumed.stdout
    rows = results(tmp_path)
    assert [(r["variant"], r["outcome"]) for r in rows] == [
        ("test_s.py::test_quick", "PASS"), ("test_s.py::test_slow", "PASS"), ("(session)", "PASS")]
    quick, slow, session = rows
    assert session["details"]["suite"]["resumed"] == 1  # type: ignore[index]
    assert session["details"]["suite"]["counts"] == {"passed": 2}  # type: ignore[index]
    assert "1 recorded before the run was resumed" in str(session["reason"])
    # Each test's log link leads to the part of the session that ran it.
    assert slow["log"] == session["log"] != quick["log"]
    assert "quick ran" in (run_dir / str(quick["log"])).read_text()
    assert "slow ran" in (run_dir / str(slow["log"])).read_text()

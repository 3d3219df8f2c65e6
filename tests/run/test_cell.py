"""One batch of cells through real pytest processes (the host backend, tests/data/behaviour)."""

from __future__ import annotations

from pathlib import Path

from harness.envs.host import HostBackend
from harness.matrix.load import parse_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import make_plan
from harness.run.cell import iter_batch, run_cell
from tests.conftest import DATA, PY

CASES = DATA / "behaviour"


def cells(tmp_path: Path, timeout: float, *variants: str) -> list:  # type: ignore[type-arg]
    spec = parse_matrix(f"version: 1\ncases_dir: {CASES}\ndefaults: {{timeout: {timeout}}}\n"
                        f"environments:\n  host: {{backend: host, python: '{PY}'}}\n",
                        file="m.yaml", base=tmp_path)
    by_variant = {c.case.variant: c for c in make_plan(spec, collect_cases(CASES), ("cpu",)).cells}
    return [by_variant[v] for v in variants]


def test_one_process_runs_the_batch_and_a_fresh_one_starts_after_each_crash(
        tmp_path: Path) -> None:
    batch = cells(tmp_path, 3, "pass", "segfault", "reproduces", "hang", "os_exit",
                  "other_error")
    runs = list(iter_batch(batch, HostBackend(tmp_path), None, cases_dir=CASES))
    got = {r.result.variant: r.result.outcome for r in runs}
    assert got == {"pass": "PASS", "segfault": "CRASH", "reproduces": "REPRODUCED",
                   "hang": "TIMEOUT", "os_exit": "CRASH", "other_error": "FAIL"}
    assert [r.result.variant for r in runs] == [c.case.variant for c in batch]  # in order
    pids = {r.result.variant: next(e["pid"] for e in r.events if e["event"] == "session")
            for r in runs}
    # pass+segfault | reproduces+hang | os_exit | other_error: a new process after each death
    assert pids["pass"] == pids["segfault"] != pids["reproduces"] == pids["hang"]
    assert len(set(pids.values())) == 4
    assert runs[0].log_name == runs[1].log_name  # one process, one log
    hang = next(r.result for r in runs if r.result.variant == "hang")
    assert hang.reason.startswith("no result after 3 s") and 2.5 < hang.duration < 10


def test_a_lone_cell_is_its_own_process_and_its_own_log(tmp_path: Path) -> None:
    (cell,) = cells(tmp_path, 30, "pass")
    run = run_cell(cell, HostBackend(tmp_path), None, cases_dir=CASES)
    assert run.result.outcome == "PASS" and run.log_name == cell.cell_id
    assert b"1 passed" in run.log


def test_a_backend_bug_is_an_error_with_its_traceback_in_the_log(tmp_path: Path) -> None:
    class Broken(HostBackend):
        def realize(self, spec):  # type: ignore[no-untyped-def]
            raise TypeError("unexpected keyword 'gpus'")

    batch = cells(tmp_path, 30, "pass", "reproduces")
    runs = list(iter_batch(batch, Broken(tmp_path), None, cases_dir=CASES))
    assert [r.result.outcome for r in runs] == ["ERROR", "ERROR"]
    assert runs[0].result.reason == ("backend bug while realizing the environment: "
                                     "TypeError: unexpected keyword 'gpus'")
    assert b"Traceback (most recent call last)" in runs[0].log and not runs[0].result.infra
    assert runs[0].env_built is None


def test_a_case_past_its_memory_limit_is_out_of_memory_and_the_next_goes_on(
        tmp_path: Path) -> None:
    """`memory:` on a local backend was accepted and ignored: the case took what it wanted."""
    spec = parse_matrix(f"version: 1\ncases_dir: {CASES}\nenvironments:\n"
                        f"  host: {{backend: host, python: '{PY}', memory: 256m}}\n",
                        file="m.yaml", base=tmp_path)
    plan = {c.case.variant: c for c in make_plan(spec, collect_cases(CASES), ("cpu",)).cells}
    runs = list(iter_batch([plan["allocate"], plan["pass"]], HostBackend(tmp_path), None,
                           cases_dir=CASES))
    assert [r.result.outcome for r in runs] == ["CRASH", "PASS"]
    assert runs[0].result.reason.startswith("out of memory (memory: 256m): MemoryError")

"""One batch of cells through real pytest processes (the host backend, tests/data/behaviour)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.errors import BackendError, EnvImportError, InfraError
from harness.core.matrix import EnvSpec
from harness.core.results import CellRun
from harness.envs import Environment, LaunchRequest, Process, Realizing
from harness.envs.host import HostBackend
from harness.envs.uv import UvBackend
from harness.matrix.load import parse_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import make_plan
from harness.run.cell import iter_batch, run_cell
from harness.run.supervise import Cancelled, EnvCache, ProcessGuard
from tests.conftest import DATA, PY
from tests.core.test_reaper import running
from tests.packages import make_wheel

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
        def realize(self, spec):  # type: ignore[no-untyped-def,override]
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


class Unreachable(HostBackend):
    """A machine that cannot start a process (``lost`` False), or that stops answering once
    it has started one (True)."""

    def __init__(self, cache_dir: Path, lost: bool) -> None:
        super().__init__(cache_dir)
        self.lost = lost

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        if not self.lost:
            raise BackendError("the container did not start")
        process = super().launch(env, request)

        class Unanswered:
            def kill(self) -> None:
                process.kill()

            def wait(self, timeout: float | None = None) -> int | None:
                raise InfraError("the Docker engine stopped answering")

        return Unanswered()


@pytest.mark.parametrize(("lost", "reason"), [
    (False, "cannot start: the container did not start"),
    (True, "the Docker engine stopped answering")])
def test_a_machine_that_cannot_start_or_is_lost_is_an_infra_error_of_cells_and_sessions(
        tmp_path: Path, lost: bool, reason: str) -> None:
    backend = Unreachable(tmp_path, lost)
    batch = cells(tmp_path, 30, "pass", "reproduces")
    runs = list(iter_batch(batch, backend, None, cases_dir=CASES))
    (suite,) = make_plan(parse_matrix(
        f"version: 1\nsuites: {{s: {{path: {CASES}}}}}\nenvironments:\n"
        f"  e: {{backend: host, python: '{PY}', suites: [s]}}\n", file="m.yaml",
        base=tmp_path), (), ("cpu",)).cells
    runs.append(run_cell(suite, backend, None, cases_dir=CASES))
    assert [(r.result.outcome, r.result.reason, r.result.infra) for r in runs] == [
        ("ERROR", reason, True)] * 3


# A new uv environment's check (importing what it names, reading its fingerprint) runs beside
# its first cells; their results wait for it. Real uv, packages written on the spot.
SLOW_IMPORT = 6.0


def uv_cells(tmp_path: Path, requirements: tuple[str, ...], *variants: str,
             timeout: float = 60, variables: tuple[tuple[str, str], ...] = ()
             ) -> list:  # type: ignore[type-arg]
    folder = tmp_path / "wheels"
    folder.mkdir(exist_ok=True)
    # Names no index has (uv asks PyPI too, for pytest).
    make_wheel(folder, "harness-slow", "1.0",
               {"harness_slow/__init__.py": f"import time\ntime.sleep({SLOW_IMPORT})\n"})
    make_wheel(folder, "harness-broken", "1.0", {
        "harness_broken/__init__.py": "raise ImportError('libfoo.so.1: no such file')\n"})
    uv_env = EnvSpec(name="uv-" + "-".join(requirements), origin="test", values=(),
                     backend="uv", python=PY, requirements=requirements, pins=(),
                     find_links=(str(folder),), timeout=timeout, env_vars=variables)
    return [replace(c, env=uv_env) for c in cells(tmp_path, timeout, *variants)]


def test_a_new_environments_cells_run_while_it_is_checked_and_wait_for_the_check(
        tmp_path: Path) -> None:
    batch = uv_cells(tmp_path, ("harness-slow",), "pass", "hang", "reproduces", timeout=15)
    backend, envs = UvBackend(tmp_path / "cache"), EnvCache()
    runs, yielded = [], []
    for run in iter_batch(batch, backend, None, cases_dir=CASES, envs=envs):
        runs.append(run)
        yielded.append(time.time())
    (marker,) = (tmp_path / "cache" / "uv").glob("*/harness-env.json")
    checked_at = marker.stat().st_mtime
    assert [r.result.outcome for r in runs] == ["PASS", "TIMEOUT", "REPRODUCED"]
    # The first case ended well before the check (importing harness_slow takes 6 s) did; its
    # result was held until the check ended, and let go then, not when the next case (a
    # hang: 15 s) ended.
    assert runs[0].result.finished_at < checked_at - SLOW_IMPORT / 3
    assert checked_at <= yielded[0] < checked_at + 3 < runs[1].result.finished_at
    assert runs[2].result.finished_at > checked_at
    # Every result carries what the check read, as when it ran first.
    fingerprint = json.loads(marker.read_text())["fingerprint"]
    assert all(r.fingerprint == fingerprint for r in runs)
    assert all(r.result.fingerprint["freeze_sha256"] == fingerprint["freeze_sha256"]
               and r.result.fingerprint["key"] == {"pytest": fingerprint["key"]["pytest"]}
               for r in runs)
    assert [r.env_built for r in runs] == [True, False, False]  # said once
    # A later batch in the same process runs in the checked environment, waiting for nothing.
    assert envs.realize(batch[0], backend).checking is None
    (again,) = iter_batch(batch[:1], backend, None, cases_dir=CASES, envs=envs)
    assert again.fingerprint == fingerprint and again.env_built


def test_a_check_that_breaks_the_environment_makes_every_cell_its_error(
        tmp_path: Path) -> None:
    """As when the check ran first: the environment's ERROR, once per cell. The case still
    running when the check ends (it hangs, its timeout 60 s) is killed then, with what it
    started, and no process starts for the rest."""
    child = tmp_path / "child.pid"
    batch = uv_cells(tmp_path, ("harness-broken", "harness-slow"), "pass", "child_then_hang",
                     "segfault", "reproduces", variables=(("CHILD_PID_FILE", str(child)),))
    started = time.time()
    runs = list(iter_batch(batch, UvBackend(tmp_path / "cache"), None, cases_dir=CASES))
    assert [r.result.outcome for r in runs] == ["ERROR"] * 4
    assert {r.result.reason for r in runs} == {
        "uv-harness-broken-harness-slow was built but does not import: harness-broken: "
        "harness_broken: ImportError: libfoo.so.1: no such file"}
    assert all(r.env_built is None and not r.result.infra for r in runs)
    assert time.time() - started < 30
    # It ran beside the check (its background child wrote its pid), and is gone.
    assert child.exists() and not running(int(child.read_text()))
    assert not list((tmp_path / "cache" / "uv").glob("*/harness-env.json"))


class CheckedLater(HostBackend):
    """The host handed over with its check still to come: ``verdict`` says, ``after`` seconds
    later, what the check makes of it (None: the test settles ``checked`` itself, or never;
    no thread is left behind, a merge's linker forks only where no other thread runs). The
    logic around the check; the cells are real pytest processes. Counts the processes it
    starts."""

    def __init__(self, cache_dir: Path, after: float | None,
                 verdict: Callable[[Environment], Environment] = lambda env: env) -> None:
        super().__init__(cache_dir)
        self.after, self.verdict, self.launched = after, verdict, 0
        self.checked: Future[Environment] = Future()

    def begin(self, spec: EnvSpec) -> Realizing:
        env = self.realize(spec)

        def end() -> None:
            try:
                self.checked.set_result(self.verdict(env))
            except Exception as exc:
                self.checked.set_exception(exc)

        if self.after is not None:
            threading.Timer(self.after, end).start()
        return Realizing(replace(env, fingerprint={}, built=True), self.checked)

    def launch(self, env: Environment, request: LaunchRequest) -> Process:
        self.launched += 1
        return super().launch(env, request)


def test_runs_held_across_crashes_go_out_once_each_in_order(tmp_path: Path) -> None:
    batch = cells(tmp_path, 30, "pass", "segfault", "reproduces", "os_exit", "other_error")
    backend = CheckedLater(tmp_path, 2.0, lambda env: replace(env, built=True))
    runs = list(iter_batch(batch, backend, None, cases_dir=CASES))
    assert [r.result.variant for r in runs] == [c.case.variant for c in batch]
    assert [r.result.outcome for r in runs] == ["PASS", "CRASH", "REPRODUCED", "CRASH", "FAIL"]
    assert backend.launched == 3  # a fresh process after each crash, held runs kept
    checked = backend.checked.result()
    assert all(r.fingerprint == checked.fingerprint and r.result.fingerprint == checked.summary
               for r in runs)
    assert [r.env_built for r in runs] == [True] + [False] * 4


def test_a_check_that_failed_first_starts_no_process(tmp_path: Path) -> None:
    batch = cells(tmp_path, 30, "pass", "reproduces")
    backend = CheckedLater(tmp_path, None)
    backend.checked.set_exception(EnvImportError("host was built but does not import: x"))
    runs = list(iter_batch(batch, backend, None, cases_dir=CASES))
    assert [(r.result.outcome, r.result.reason) for r in runs] == [
        ("ERROR", "host was built but does not import: x")] * 2
    assert backend.launched == 0


def test_stopped_while_the_check_runs_nothing_held_is_a_result(tmp_path: Path) -> None:
    batch = cells(tmp_path, 60, "pass", "hang")
    backend = CheckedLater(tmp_path, None)  # the check never ends here
    guard = ProcessGuard()
    threading.Timer(3.0, guard.cancel).start()
    started = time.time()
    got: list[CellRun] = []
    with pytest.raises(Cancelled):
        got.extend(iter_batch(batch, backend, None, cases_dir=CASES, guard=guard))
    assert got == [] and time.time() - started < 20 and backend.launched == 1

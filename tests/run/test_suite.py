"""A maintainer's own test suite (tests/data/suite) through real pytest processes on the host
backend: one result per test, counted as bare pytest counts them, a crash or hang isolated to
its test, and the installed package, not the source folder, under test."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.results import CellRun
from harness.envs.host import HostBackend
from harness.matrix.load import parse_matrix
from harness.plan import collected
from harness.plan.cells import cell_id, make_plan
from harness.plan.suites import rootdir
from harness.run.cell import iter_batch, run_cell
from harness.run.suite import stable_nodeid
from tests.conftest import DATA, PY

SUITE = DATA / "suite"


def copy_suite(tmp_path: Path) -> Path:
    """The suite outside this repository, whose pyproject.toml would otherwise configure it."""
    target = tmp_path / "suite"
    shutil.copytree(SUITE, target)
    return target


def session(tmp_path: Path, folder: Path, *, env: str = "", args: str = "[]",
            timeout: float = 60, workers: int = 1, slots: int = 1) -> CellRun:
    spec = parse_matrix(
        "version: 1\nsuites:\n  mine:\n"
        f"    path: {folder / 'tests'}\n    package: yaml\n    args: {args}\n"
        f"    env: {{SUITE_BACKENDS: numpy{env}}}\n    workers: {workers}\n"
        f"environments:\n  host: {{backend: host, python: '{PY}', suites: [mine], "
        f"timeout: {timeout}}}\n", file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    return run_cell(cell, HostBackend(tmp_path), None, cases_dir=tmp_path, workers=slots)


def bare_pytest_counts(folder: Path, env: dict[str, str]) -> dict[str, int]:
    """What bare pytest says of the same suite, from its summary line (run from outside the
    project: `python -m pytest` in it would put its source folder first on sys.path)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", str(folder / "tests")],
                          capture_output=True, text=True, cwd=folder.parent,
                          env={**os.environ, **env}, check=False)
    last = proc.stdout.strip().splitlines()[-1]
    return {word.rstrip("s") if word.startswith("error") else word: int(n)
            for n, word in re.findall(r"(\d+) (\w+)", last.split(" in ")[0])}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, CellRun]:
    """The suite as it is, run once in one process: its folder, the suite and the run, read by
    the tests that do not change either."""
    tmp_path = tmp_path_factory.mktemp("plain")
    folder = copy_suite(tmp_path)
    return tmp_path, folder, session(tmp_path, folder)


def test_each_test_is_a_result_counted_as_bare_pytest_counts_them(
        plain: tuple[Path, Path, CellRun]) -> None:
    tmp_path, folder, run = plain
    tests = {c.result.variant: c.result for c in run.children}
    assert {k: str(v.outcome) for k, v in tests.items()} == {
        "test_broken_module.py": "ERROR", "test_endings.py::test_pass": "PASS",
        "test_endings.py::test_fail": "FAIL", "test_endings.py::test_skip": "SKIP",
        "test_endings.py::test_xfail": "SKIP", "test_endings.py::test_broken_fixture": "ERROR",
        "test_endings.py::test_segfault": "SKIP", "test_endings.py::test_hang": "SKIP",
        "test_endings.py::test_after": "PASS", "test_zlast.py::test_other_module": "PASS"}
    assert tests["test_endings.py::test_fail"].reason == (
        "AssertionError: one is not two\nassert 1 == 2")
    assert tests["test_broken_module.py"].reason == (
        "collection failed: ModuleNotFoundError: No module named "
        "'module_that_is_not_installed'")
    assert tests["test_endings.py::test_xfail"].reason == (
        "expected to fail (xfail): known upstream")
    # The session sums them up as pytest's own summary line does.
    suite = run.result.details["suite"]
    assert suite["counts"] == bare_pytest_counts(folder, {"SUITE_BACKENDS": "numpy"})
    assert run.result.reason == "1 failed, 3 passed, 3 skipped, 1 xfailed, 2 errors"
    assert run.result.outcome == "FAIL" and suite["processes"] == 1
    assert suite["pytest_exit"] == 1  # pytest's own exit status: tests failed
    # Every test's cell id is the plan's hash of its suite-qualified id; each names its session.
    env = parse_matrix(f"version: 1\nsuites: {{mine: {{path: {folder}}}}}\nenvironments:\n"
                       f"  host: {{backend: host, python: '{PY}', suites: [mine]}}\n",
                       file="m.yaml", base=tmp_path).environments[0]
    for child in run.children:
        assert child.result.parent == run.result.cell_id
        assert child.result.cell_id == cell_id(env, f"mine::{child.result.variant}", "cpu")
    # Its tests share one fingerprint summary and one mapping of axis values: the record
    # names a value it met already without encoding it again.
    assert len({id(c.result.fingerprint) for c in run.children}) == 1
    assert len({id(c.result.values) for c in run.children}) == 1


def test_the_installed_package_is_imported_and_a_shadowing_folder_is_an_error(
        tmp_path: Path) -> None:
    """pytest's default import mode puts a test folder's parent first on sys.path, where a
    project keeps its source: the tests would import the source, not what is installed."""
    folder = copy_suite(tmp_path)
    shutil.copytree(folder / "yaml", folder / "tests" / "yaml")  # next to the tests
    run = session(tmp_path, folder)
    (imported,) = run.result.details["suite"]["imported"]
    assert imported["installed"] and "site-packages" in imported["file"]
    shadowed = session(tmp_path, folder, args="['--import-mode=prepend']")
    (imported,) = shadowed.result.details["suite"]["imported"]
    assert not imported["installed"]
    assert imported["file"] == str(folder / "tests" / "yaml" / "__init__.py")
    assert shadowed.result.outcome == "ERROR"
    assert shadowed.result.reason == (
        f"yaml was imported from {imported['file']}, not from the environment's "
        "site-packages (the suite's folder shadows the installed package)")


def test_what_a_session_collected_is_what_plan_says_it_will_run(tmp_path: Path) -> None:
    """The session keeps what it collected in the backend's cache; `harness plan` reads it
    there, keyed by the suite's files and the environment, and says it is unknown once a
    test file changes."""
    folder = copy_suite(tmp_path)
    text = ("version: 1\nsuites:\n  mine:\n"
            f"    path: {folder / 'tests'}\n    package: yaml\n"
            "    env: {SUITE_BACKENDS: numpy}\n"
            f"environments:\n  host: {{backend: host, python: '{PY}', suites: [mine]}}\n")
    (tmp_path / "m.yaml").write_text(text)

    def plan_says() -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "plan", "-m", str(tmp_path / "m.yaml")],
            capture_output=True, text=True, check=True, cwd=tmp_path,
            env={**os.environ, "HARNESS_CACHE_DIR": str(tmp_path)})
        return proc.stdout.splitlines()[-1]

    assert plan_says().startswith("suite mine in host @cpu: tests not known yet")
    run = session(tmp_path, folder)  # the host backend's cache: tmp_path
    spec = parse_matrix(text, file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    assert cell.case.suite is not None
    found = collected.load(cell.env, cell.case.suite, "cpu", cache_dir=tmp_path)
    assert found is not None
    ran = [c.result.variant for c in run.children
           if not c.result.reason.startswith("collection failed")]
    assert list(found.tests) == ran and found.errors == 1  # test_broken_module.py
    assert plan_says().startswith(f"suite mine in host @cpu: {len(ran)} tests, 1 module did "
                                  "not collect (as collected there ")
    with open(folder / "tests" / "test_zlast.py", "a") as fh:
        fh.write("\n\ndef test_added():\n    pass\n")
    assert collected.load(cell.env, cell.case.suite, "cpu", cache_dir=tmp_path) is None
    assert "tests not known yet" in plan_says()


def test_a_crash_and_a_hang_are_their_tests_and_the_rest_runs_on(tmp_path: Path) -> None:
    folder = copy_suite(tmp_path)
    run = session(tmp_path, folder, env=", SUITE_CRASH: '1', SUITE_HANG: '1'", timeout=3)
    tests = {c.result.variant: c.result for c in run.children}
    assert tests["test_endings.py::test_segfault"].outcome == "CRASH"
    assert "SIGSEGV" in tests["test_endings.py::test_segfault"].reason
    assert tests["test_endings.py::test_hang"].outcome == "TIMEOUT"
    assert tests["test_endings.py::test_after"].outcome == "PASS"  # after both, in a third
    assert tests["test_zlast.py::test_other_module"].outcome == "PASS"
    assert run.result.details["suite"]["processes"] == 3
    assert run.result.reason.endswith("(3 pytest processes: a test took one down)")
    assert len(tests) == 10


def test_xdist_workers_share_the_suite_and_a_crash_or_hang_is_still_its_test(
        tmp_path: Path, plain: tuple[Path, Path, CellRun]) -> None:
    """With two slots held, the one pytest process runs two xdist workers (the host's
    pytest-xdist): a worker's crash is its test's CRASH and xdist goes on in the same process;
    a hang is its test's TIMEOUT, and what was left runs in one more process. Every test once,
    counted as one process without xdist counts them."""
    folder = copy_suite(tmp_path)
    # timeout: xdist's workers start inside the first test's time (two interpreters on a
    # loaded two-core machine can take seconds)
    run = session(tmp_path, folder, env=", SUITE_CRASH: '1', SUITE_HANG: '1'", timeout=10,
                  workers=4, slots=2)
    tests = {c.result.variant: c.result for c in run.children}
    assert len(tests) == 10, (run.result.reason, run.log[-3000:])
    assert tests["test_endings.py::test_segfault"].outcome == "CRASH"
    # The worker's crash in xdist's words, not the line naming the worker's interpreter
    assert tests["test_endings.py::test_segfault"].reason.startswith("worker 'gw")
    # counted as a crash is without xdist: in the suite's "error" column
    assert tests["test_endings.py::test_segfault"].details["pytest"] == "error"
    assert tests["test_endings.py::test_hang"].outcome == "TIMEOUT"
    assert tests["test_endings.py::test_after"].outcome == "PASS"
    assert tests["test_zlast.py::test_other_module"].outcome == "PASS"
    # The hang costs a process only when xdist still held tests behind it; which worker runs
    # what, and so whether every other test had ended by then, is xdist's timing.
    assert run.result.details["suite"]["processes"] in (1, 2), run.result.reason
    # The crash alone costs none: xdist replaces the worker (without xdist it costs one).
    crashed = session(tmp_path, folder, env=", SUITE_CRASH: '1'", workers=4, slots=2)
    assert crashed.result.details["suite"]["processes"] == 1, crashed.result.reason
    assert {c.result.variant: str(c.result.outcome) for c in crashed.children}[
        "test_endings.py::test_segfault"] == "CRASH"
    # -n 2: the slots held, not the 4 asked for (xdist names a worker that replaces a
    # crashed one anew)
    workers = {c.result.details.get("worker") for c in run.children} - {None}
    assert {"gw0", "gw1"} <= workers and "gw3" not in workers
    one = plain[2]  # the same suite in one process without xdist
    assert run.result.details["suite"]["collected"] == one.result.details["suite"][
        "collected"]
    assert {c.result.variant: (str(c.result.outcome), c.result.reason) for c in session(
        tmp_path, folder, workers=2, slots=2).children} == {
        c.result.variant: (str(c.result.outcome), c.result.reason) for c in one.children}


def test_a_suite_that_does_not_collect_is_the_environments_error(tmp_path: Path) -> None:
    """The suite's conftest refuses to start without its variable: no test, one ERROR that
    says why."""
    folder = copy_suite(tmp_path)
    spec = parse_matrix(f"version: 1\nsuites: {{mine: {{path: {folder / 'tests'}}}}}\n"
                        f"environments:\n  host: {{backend: host, python: '{PY}', "
                        "suites: [mine]}\n", file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    (run,) = iter_batch([cell], HostBackend(tmp_path), None, cases_dir=tmp_path)
    assert run.children == () and run.result.outcome == "ERROR"
    assert run.result.reason.startswith("pytest ended (exit 4) before it collected the suite")
    assert "SUITE_BACKENDS is not set" in run.result.reason


def run_suite(tmp_path: Path, folder: Path, options: str = "") -> list[CellRun]:
    """The suite at ``folder`` (``options``: more of its matrix entry) on the host, each run."""
    spec = parse_matrix(f"version: 1\nsuites: {{mine: {{path: {folder}{options}}}}}\n"
                        f"environments:\n  host: {{backend: host, python: '{PY}', "
                        "suites: [mine]}\n", file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    return list(iter_batch([cell], HostBackend(tmp_path), None, cases_dir=tmp_path))


def test_a_suite_given_as_its_rootdir_runs_its_testpaths_as_bare_pytest_there_does(
        tmp_path: Path) -> None:
    folder = tmp_path / "project"
    (folder / "tests").mkdir(parents=True)
    (folder / "scripts").mkdir()
    (folder / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (folder / "tests" / "test_in.py").write_text("def test_in():\n    pass\n")
    (folder / "scripts" / "test_out.py").write_text("def test_out():\n    assert 0\n")
    runs = run_suite(tmp_path, folder)
    assert [r.result.variant for r in runs] == ["tests/test_in.py::test_in", "(session)"]


def test_an_import_mode_in_the_suites_addopts_applies_as_under_bare_pytest(
        tmp_path: Path) -> None:
    # Two test modules of one name: importlib imports both, append only the first.
    folder = tmp_path / "project"
    for sub in ("a", "b"):
        (folder / sub).mkdir(parents=True)
        (folder / sub / "test_same.py").write_text(f"def test_{sub}():\n    pass\n")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = --import-mode=importlib\n")
    runs = run_suite(tmp_path, folder)
    assert {r.result.variant: str(r.result.outcome) for r in runs} == {
        "a/test_same.py::test_a": "PASS", "b/test_same.py::test_b": "PASS", "(session)": "PASS"}


def test_a_test_whose_id_holds_a_newline_still_runs_after_a_crash(tmp_path: Path) -> None:
    # pytest keeps such ids raw when the suite asks; the next process is given them by name.
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\ndisable_test_id_escaping_and_forfeit_all_"
                                       "rights_to_community_support = true\n")
    (folder / "test_raw.py").write_text(
        "import os, pytest\n\ndef test_crash():\n    os._exit(1)\n\n"
        "@pytest.mark.parametrize('v', ['nl\\nx', 'plain'], ids=['nl\\nx', 'plain'])\n"
        "def test_p(v):\n    pass\n")
    runs = run_suite(tmp_path, folder)
    assert {r.result.variant: str(r.result.outcome) for r in runs} == {
        "test_raw.py::test_crash": "CRASH", "test_raw.py::test_p[nl\nx]": "PASS",
        "test_raw.py::test_p[plain]": "PASS", "(session)": "FAIL"}


def test_a_sessions_log_stays_within_the_limit_across_its_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each crash starts a process whose log is within the limit; the session's, all of them.
    monkeypatch.setattr("harness.run.watch.LOG_LIMIT", 4000)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_loud.py").write_text("import os\n" + "".join(
        f"\ndef test_{i}():\n    os.write(1, b'x' * 3000)\n    os._exit(1)\n" for i in range(4)))
    runs = run_suite(tmp_path, folder, ", args: ['-s']")
    assert runs[-1].result.details["suite"]["processes"] == 4
    assert all(len(r.log) < 4100 for r in runs), [len(r.log) for r in runs]
    assert b"bytes cut" in runs[-1].log


WAITING_SUITE = """\
import os, pathlib, time

def test_first():
    pass

def test_second():
    go = pathlib.Path(os.environ["SUITE_GO"])
    deadline = time.monotonic() + 60
    while not go.exists():
        assert time.monotonic() < deadline, "never told to go"
        time.sleep(0.05)
"""


def waiting_suite(tmp_path: Path) -> Path:
    """A suite whose second test waits for a file: its first has ended, the process lives."""
    (tmp_path / "waiting").mkdir()
    (tmp_path / "waiting" / "test_wait.py").write_text(WAITING_SUITE)
    (tmp_path / "waiting" / "pytest.ini").write_text("[pytest]\n")
    return tmp_path / "waiting"


def test_each_test_is_yielded_as_it_ends_while_the_suite_runs(tmp_path: Path) -> None:
    go = tmp_path / "go"
    spec = parse_matrix(
        f"version: 1\nsuites: {{mine: {{path: {waiting_suite(tmp_path)}, "
        f"env: {{SUITE_GO: '{go}'}}}}}}\nenvironments:\n"
        f"  host: {{backend: host, python: '{PY}', suites: [mine]}}\n",
        file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    runs = iter_batch([cell], HostBackend(tmp_path), None, cases_dir=tmp_path)
    first = next(runs)
    assert not go.exists()  # the second test is still waiting: the process runs
    assert first.result.variant == "test_wait.py::test_first" and first.result.outcome == "PASS"
    assert first.result.parent == cell.cell_id and first.log  # the session's log so far
    go.touch()
    rest = list(runs)
    assert [r.result.variant for r in rest] == ["test_wait.py::test_second", "(session)"]
    assert rest[0].result.outcome == "PASS" and rest[-1].result.cell_id == cell.cell_id
    assert rest[-1].children == ()  # each test was yielded once, on its own


def test_the_interpreters_teardown_is_not_waited_for(tmp_path: Path) -> None:
    """Once pytest is done, what is left is the interpreter's teardown (a second with torch
    loaded; here an atexit handler that would take a minute): the session ends without it."""
    folder = tmp_path / "slowexit"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "test_exit.py").write_text(
        "import atexit, time\natexit.register(time.sleep, 60)\n\ndef test_one():\n    pass\n")
    spec = parse_matrix(
        f"version: 1\nsuites: {{mine: {{path: {folder}}}}}\nenvironments:\n"
        f"  host: {{backend: host, python: '{PY}', suites: [mine], timeout: 120}}\n",
        file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    started = time.monotonic()
    run = run_cell(cell, HostBackend(tmp_path), None, cases_dir=tmp_path)
    assert time.monotonic() - started < 30
    assert run.result.outcome == "PASS" and run.result.details["suite"]["pytest_exit"] == 0
    assert [c.result.outcome for c in run.children] == ["PASS"]


def test_node_ids_do_not_depend_on_the_machine(tmp_path: Path) -> None:
    assert stable_nodeid("../../venv/lib/python3.11/site-packages/mylib/tests/test_a.py::t") == (
        "mylib/tests/test_a.py::t")
    assert stable_nodeid("tests/test_a.py::t[1]") == "tests/test_a.py::t[1]"
    (tmp_path / "proj" / "tests").mkdir(parents=True)
    assert rootdir(tmp_path / "proj" / "tests") == tmp_path / "proj" / "tests"
    (tmp_path / "proj" / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert rootdir(tmp_path / "proj" / "tests") == tmp_path / "proj" / "tests"  # not pytest's
    (tmp_path / "proj" / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    assert rootdir(tmp_path / "proj" / "tests") == tmp_path / "proj"
    (tmp_path / "proj" / "tests" / "pytest.toml").write_text("")  # pytest 9's, even empty
    assert rootdir(tmp_path / "proj" / "tests") == tmp_path / "proj" / "tests"


@pytest.mark.parametrize("events", ["collected", "finish"])
def test_the_plugin_writes_what_the_record_needs(tmp_path: Path, events: str) -> None:
    folder = copy_suite(tmp_path)
    path = tmp_path / "events.jsonl"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "harness_suite",
                    "-p", "no:cacheprovider", f"--harness-suite-events={path}",
                    "--harness-suite-package=yaml", str(folder / "tests" / "test_zlast.py")],
                   env={**os.environ, "SUITE_BACKENDS": "x",
                        "PYTHONPATH": str(Path(__file__).parents[2] / "harness" / "inenv")},
                   cwd=tmp_path, capture_output=True, check=True)
    kinds = [json.loads(line) for line in path.read_text().splitlines()]
    event = next(e for e in kinds if e["event"] == events)
    if events == "collected":
        assert event["nodeids"] == ["suite/tests/test_zlast.py::test_other_module"]
        assert event["imported"][0]["name"] == "yaml"
    else:
        assert (event["outcome"], event["pytest"]) == ("PASS", "passed")

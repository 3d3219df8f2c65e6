"""The pytest plugin that runs a maintainer's own suite inside an environment under test, as
bare pytest would, and writes how each test ended, one JSON line per event, as it happens
(stdlib + pytest only). Under pytest-xdist the controller alone writes the events."""

from __future__ import annotations

import glob
import importlib
import json
import os
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import harness_probe
import pytest
from harness_events import Events, skip_reason, stable_nodeid


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-suite")
    group.addoption("--harness-suite-events", default=None,
                    help="append one JSON line per test event to this file")
    group.addoption("--harness-suite-only", default=None,
                    help="run only the node ids this file lists (a JSON list)")
    group.addoption("--harness-suite-done", default=None,
                    help="do not run the tests whose stable node ids this file lists")
    group.addoption("--harness-suite-package", action="append", default=[],
                    help="a package under test: record where it was imported from")


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--harness-suite-events")
    if path and not hasattr(config, "workerinput"):  # an xdist worker: its controller says
        config.pluginmanager.register(_Recorder(config, Events(path)), "harness-suite-events")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """A suite given as its rootdir runs its ``testpaths`` (pytest reads them only when started
    there; it starts in an empty folder); the installed package goes ahead of the suite's folder
    on ``sys.path``, unless the suite's arguments or addopts (in ``args``) choose an import mode."""
    if not any(a.startswith("--import-mode") for a in args):
        args.append("--import-mode=append")
        early_config.known_args_namespace.importmode = "append"
    given, root = early_config.known_args_namespace.file_or_dir, early_config.rootpath
    if len(given) != 1 or given[0] not in args or Path(given[0]).resolve() != root.resolve():
        return
    found = [p for pattern in early_config.getini("testpaths")
             for p in sorted(glob.iglob(str(root / pattern), recursive=True))]
    if found:
        where = args.index(given[0])
        args[where:where + 1] = early_config.known_args_namespace.file_or_dir = found


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    only, done = config.getoption("--harness-suite-only"), config.getoption("--harness-suite-done")
    if not only and not done:
        return
    # JSON lists: a node id may hold a newline (raw ids, when the suite's ini asks)
    wanted = set(json.loads(Path(only).read_text(encoding="utf-8"))) if only else None
    recorded = set(json.loads(Path(done).read_text(encoding="utf-8"))) if done else set()
    dropped = [item for item in items if stable_nodeid(item.nodeid) in recorded
               or (wanted is not None and item.nodeid not in wanted)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = {id(item) for item in dropped}
        items[:] = [item for item in items if id(item) not in gone]


class _Recorder:
    """The events of one session; a plugin object, so that hooks without a config (a
    collect report, a test's log start) reach the session's file."""

    def __init__(self, config: pytest.Config, events: Events) -> None:
        self.config, self.events = config, events
        self.phases: dict[str, list[pytest.TestReport]] = {}
        self.collected = False

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.events.write(event="session", pid=os.getpid(), time=time.time(),
                          hardware=harness_probe.probe(os.environ.get("CUDA_VISIBLE_DEVICES")))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.events.write(event="collect_error", nodeid=report.nodeid, time=time.time(),
                              reason=error_lines(_text(report)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not getattr(self.config.option, "numprocesses", None):  # xdist's: its workers'
            self._collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # xdist's controller collects nothing itself; every worker collects the same tests.
        self._collected(list(ids))

    def _collected(self, nodeids: list[str]) -> None:
        if not self.collected:
            self.collected = True
            packages = self.config.getoption("--harness-suite-package")
            self.events.write(event="collected", time=time.time(), nodeids=nodeids,
                              imported=[imported_from(name) for name in packages])

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        # Written before the test runs, so a crash inside it is attributed to it.
        self.events.write(event="start", nodeid=nodeid, time=time.time())

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if str(report.when) == "???":  # xdist: its worker died in this test; no end comes
            self.phases.pop(report.nodeid, None)
            self.events.write(event="finish", nodeid=report.nodeid, time=time.time(),
                              duration=0.0, outcome="CRASH", pytest="error",
                              reason=error_lines(_text(report)))
            return
        self.phases.setdefault(report.nodeid, []).append(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.exitstatus = int(exitstatus)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # Only the interpreter's teardown is left, which the harness does not wait for.
        self.events.write(event="ended", time=time.time(),
                          exitstatus=getattr(self, "exitstatus", None))

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        reports = self.phases.pop(nodeid, [])
        # xdist's controller: which worker ran it (gw0, gw1...), from the reports' node
        worker = next((str(r.node.gateway.id) for r in reports
                       if hasattr(getattr(r, "node", None), "gateway")), None)
        self.events.write(event="finish", nodeid=nodeid, time=time.time(),
                          duration=round(sum(r.duration for r in reports), 3),
                          **judge(reports), **({"worker": worker} if worker else {}))


def imported_from(name: str) -> dict[str, Any]:
    """Where ``name`` comes from in this process (the module the tests imported, else what
    importing it now gives), and whether that is the environment's site-packages."""
    module = sys.modules.get(name)
    if module is None:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # the package under test does not import: say so
            return {"name": name, "file": None, "installed": False,
                    "error": error_lines(f"{type(exc).__name__}: {exc}")}
    file = getattr(module, "__file__", None)
    if file is None:  # a namespace package: its first folder
        paths = list(getattr(module, "__path__", []))
        file = paths[0] if paths else None
    roots = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    where = Path(file).resolve() if file else None
    installed = where is not None and any(r == where or r in where.parents for r in roots)
    return {"name": name, "file": file, "installed": installed,
            "version": getattr(module, "__version__", None)}


def judge(reports: list[pytest.TestReport]) -> dict[str, Any]:
    """A test's phase reports as one outcome, and pytest's own word for it."""
    by_phase = {r.when: r for r in reports}
    setup, call, teardown = (by_phase.get(w) for w in ("setup", "call", "teardown"))
    if setup is not None and setup.failed:
        return {"outcome": "ERROR", "pytest": "error",
                "reason": "setup failed: " + _crash(setup)}
    for report in (setup, call):
        if report is not None and report.skipped:
            if hasattr(report, "wasxfail"):
                why = str(report.wasxfail)
                return {"outcome": "SKIP", "pytest": "xfailed",
                        "reason": "expected to fail (xfail)" + (f": {why}" if why else "")}
            return {"outcome": "SKIP", "pytest": "skipped", "reason": skip_reason(report)}
    if call is not None and call.failed:
        return {"outcome": "FAIL", "pytest": "failed", "reason": _crash(call),
                "traceback": _text(call)[-2000:]}
    if teardown is not None and teardown.failed:
        return {"outcome": "ERROR", "pytest": "error",
                "reason": "teardown failed: " + _crash(teardown)}
    if call is not None and hasattr(call, "wasxfail"):
        return {"outcome": "PASS", "pytest": "xpassed", "reason": "passed, though marked xfail"}
    return {"outcome": "PASS", "pytest": "passed"}


def _crash(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return error_lines(str(message) if message else _text(report))


def _text(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The report as pytest prints it, less the line xdist puts first (its worker's Python)."""
    return "" if report.longrepr is None else str(report.longrepr)


def error_lines(text: str, lines: int = 3) -> str:
    """What a reader needs of pytest's report: its ``E`` lines (the exception), else the
    first lines."""
    marked = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    kept = marked or [line.strip() for line in text.strip().splitlines() if line.strip()]
    return "\n".join(kept[:lines])[:400]

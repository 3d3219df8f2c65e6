"""A test suite's session cell: the whole suite in one pytest process in the environment (a
test that crashes or hangs it is its CRASH or TIMEOUT; the rest run on in a fresh process),
one result per test, yielded as it ends so that a killed harness keeps it."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core.matrix import SuiteSpec, memory_bytes
from harness.core.results import CellResult, CellRun, Outcome
from harness.envs import Backend, Environment, LaunchRequest
from harness.inenv.harness_events import stable_nodeid
from harness.plan import collected
from harness.plan.cells import Cell, cell_id
from harness.plan.suites import pytest_words, rootdir
from harness.run.classify import Decision, Ending, classify
from harness.run.supervise import ProcessGuard
from harness.run.watch import (
    Watch,
    cell_variables,
    clipped,
    read_log,
    scratch_folder,
    tail,
    watch_process,
)

MAX_PROCESSES = 50  # a suite that crashes its process this often has told us enough
LOG_EVERY = 5.0  # seconds between rewrites of a running session's log


def suite_argv(suite: SuiteSpec, events: Path, lists: list[str], workers: int
               ) -> tuple[str, ...]:
    """pytest's arguments for ``suite`` (``lists``: ``_listed``'s): no cache written into the
    suite's folder (the plugin puts the installed package ahead of it on ``sys.path``)."""
    argv = ["-m", "pytest", "-p", "harness_suite", "-p", "no:cacheprovider", "-q", "-rN",
            "--continue-on-collection-errors", f"--harness-suite-events={events}", *lists]
    argv += [f"--harness-suite-package={p}" for p in suite.packages]
    if suite.path is not None:
        argv.append(f"--rootdir={rootdir(Path(suite.path))}")
    if workers > 1:
        argv += ["-n", str(workers)]
    argv += list(suite.args)
    argv += [suite.path] if suite.path is not None else ["--pyargs", str(suite.pyargs)]
    return tuple(argv)


def iter_session(cell: Cell, env: Environment, backend: Backend, gpu: int | None, *,
                 guard: ProcessGuard, place: dict[str, Any], workers: int = 1
                 ) -> Iterator[CellRun]:
    """Run the suite of ``cell``, yielding each test's run as it ends, then the session's own;
    ``workers``: the CPU slots it holds for pytest-xdist. Raises only ``Cancelled``."""
    suite = cell.case.suite
    assert suite is not None
    session = _Session(cell, env, place)
    only: list[str] | None = None  # None: every test pytest collects
    # Resumed: the first process deselects the tests recorded already.
    done: list[str] | None = [r.nodeid for r in cell.resumed] or None
    # What it collects is kept under the suite's files as they are now, before it starts.
    kept_as = None if cell.resumed else collected.key(env.spec, suite, cell.hardware)
    for processes in range(1, MAX_PROCESSES + 1):
        with scratch_folder(cell.cell_id) as scratch:
            ended = yield from _one_process(session, suite, backend, gpu, scratch, guard, only,
                                            done if processes == 1 else None,
                                            max(1, min(workers, suite.workers)))
            session.log = clipped(session.log + read_log(scratch / "cell.log"))
        if ended:  # it reached no test, or every test it was given ran
            break
        only = [n for n in session.collected if n not in session.children]
        if not only:
            break
    yield from session.fresh(b"")  # a test the last process's end settled
    if session.failure is None and (session.collected or session.collect_errors):
        # What ``harness plan`` says this session runs (a resumed session's is partial: none).
        collected.save(kept_as, env.spec, suite, [stable_nodeid(n) for n in session.collected],
                       len(session.collect_errors), cache_dir=backend.cache_dir)
    yield CellRun(result=session.summary(processes), log=session.log, log_name=session.log_name,
                  fingerprint=env.fingerprint)


class _Session:
    """What the suite's processes have said so far, across processes."""

    def __init__(self, cell: Cell, env: Environment, place: dict[str, Any]) -> None:
        self.cell, self.env, self.place = cell, env, place
        # One of each for all its tests: the record meets the same object again.
        self.values, self.fingerprint = dict(env.spec.values), env.summary
        self.started_at = time.time()
        self.collected: list[str] = []  # pytest's node ids, in its order
        self.collect_errors: dict[str, str] = {}
        self.imported: list[dict[str, Any]] = []
        self.children: dict[str, CellRun] = {}  # each test that ended, by pytest node id
        self.failure: Decision | None = None  # the session itself failed (no collection)
        self.log = b""  # what the processes that ended wrote
        self.sent: set[str] = set()  # the tests already yielded
        self.log_sent_at = 0.0
        self.exitstatus: int | None = None  # pytest's own, from the last process that said
        # A resumed session's recorded tests count as they are, by their stable node id.
        for done in cell.resumed:
            self.children[done.nodeid] = CellRun(result=done)
            self.sent.add(done.nodeid)
        # A resumed session's log is its own, named by the count of tests done before.
        self.log_name = (f"{cell.cell_id}.from-{len(cell.resumed)}" if cell.resumed
                         else cell.cell_id)

    def fresh(self, current_log: bytes) -> Iterator[CellRun]:
        """The tests that ended since the last call, in pytest's order; the first carries the
        session's log so far, at most every LOG_EVERY seconds (the others share its file)."""
        new = [n for n in self.order() if n not in self.sent]
        attach = bool(new) and time.monotonic() - self.log_sent_at >= LOG_EVERY
        for i, nodeid in enumerate(new):
            self.sent.add(nodeid)
            run = self.children[nodeid]
            if i == 0 and attach:
                self.log_sent_at = time.monotonic()
                run = replace(run, log=clipped(self.log + current_log))
            yield run

    def order(self) -> list[str]:
        """The tests that ended: in pytest's collection order, then the others as they ended."""
        known = [n for n in self.collected if n in self.children]
        placed = set(known)
        return known + [n for n in self.children if n not in placed]

    def take(self, watch: Watch) -> None:
        """What the process wrote since the last call: its collection and the tests ended."""
        for event in watch.read():
            kind = event.get("event")
            if kind == "collected" and not self.collected:
                self.collected = [str(n) for n in event.get("nodeids", [])]
                self.imported = list(event.get("imported", []))
            elif kind == "collect_error":
                nodeid, reason = str(event.get("nodeid", "")), str(event.get("reason", ""))
                if nodeid not in self.collect_errors:
                    self.collect_errors[nodeid] = reason
                    self.add(nodeid, classify(Ending(kind="collect_error", reason=reason)),
                             pytest_word="error")
            elif kind == "finish":
                self.finished(str(event.get("nodeid", "")), event, watch)

    def finished(self, nodeid: str, finish: dict[str, Any], watch: Watch) -> None:
        decision = classify(Ending(kind="finished", reported=Outcome(finish["outcome"]),
                                   reason=str(finish.get("reason", "")),
                                   memory=self.env.spec.memory))
        details = {"pytest": finish.get("pytest")}
        details.update((k, finish[k]) for k in ("worker", "traceback") if finish.get(k))
        self.add(nodeid, decision, pytest_word=finish.get("pytest"),
                 hardware=watch.hardware, details=details,
                 duration=round(float(finish.get("duration", 0.0)), 3),
                 finished_at=float(finish.get("time") or time.time()))

    def add(self, nodeid: str, decision: Decision, *, pytest_word: Any, **fields: Any) -> None:
        """A test's result. It keeps no events: its one event (how it ended) is its result."""
        cell, suite, name = self.cell, self.cell.case.case_id, stable_nodeid(nodeid)
        fields.setdefault("finished_at", time.time())
        fields.setdefault("details", {"pytest": pytest_word})
        result = self._result(
            cell_id=cell_id(self.env.spec, f"{suite}::{name}", cell.hardware), case_id=suite,
            variant=name, nodeid=name, outcome=decision.outcome, reason=decision.reason,
            parent=cell.cell_id, **fields)
        # Not the build's carrier (``run.cell._built_once`` marks the first run it yields).
        self.children[nodeid] = CellRun(result=result, log_name=self.log_name, env_built=False)

    def summary(self, processes: int) -> CellResult:
        """The session's own result: FAIL when a test failed or did not collect, ERROR when
        the suite never collected or imported the package under test from elsewhere."""
        outcomes = Counter(run.result.outcome for run in self.children.values())
        # pytest's own words (passed, failed, xfailed...), counted as its summary line does
        counts = Counter(str(run.result.details.get("pytest") or run.result.outcome.lower())
                         for run in self.children.values())
        decision = self.failure or classify(Ending(
            kind="session_ended", reason=pytest_words(counts), tests=len(self.children),
            failed=any(o.failed for o in outcomes),
            shadowed="; ".join(
                f"{i['name']} did not import: {i['error']}" if i.get("error") else
                f"{i['name']} was imported from {i.get('file')}, not from the environment's "
                "site-packages (the suite's folder shadows the installed package)"
                for i in self.imported if not i.get("installed"))))
        reason = decision.reason
        if processes > 1:
            reason += f" ({processes} pytest processes: a test took one down)"
        resumed = len(self.cell.resumed)
        if resumed:
            reason += f" ({resumed} recorded before the run was resumed)"
        details = {"suite": {"collected": len(self.collected) + resumed, "counts": dict(counts),
                             "outcomes": {str(o): n for o, n in outcomes.items()},
                             "collect_errors": self.collect_errors,
                             "imported": self.imported, "processes": processes,
                             "resumed": resumed, "pytest_exit": self.exitstatus}}
        case = self.cell.case
        return self._result(
            cell_id=self.cell.cell_id, case_id=case.case_id, variant=case.variant,
            nodeid=case.nodeid, outcome=decision.outcome, reason=reason, details=details,
            duration=round(time.time() - self.started_at, 3), finished_at=time.time(),
            infra=decision.infra)

    def _result(self, **fields: Any) -> CellResult:
        """A result in this session's environment, on its hardware, where it ran."""
        spec = self.env.spec
        return CellResult(environment=spec.name, values=self.values, env_key=spec.key,
                          backend=spec.backend, hardware_target=self.cell.hardware,
                          fingerprint=self.fingerprint, **fields, **self.place)


def _one_process(session: _Session, suite: SuiteSpec, backend: Backend, gpu: int | None,
                 scratch: Path, guard: ProcessGuard, only: list[str] | None,
                 done: list[str] | None, workers: int) -> Generator[CellRun, None, bool]:
    """One pytest process over the suite (or the tests in ``only``), yielding each test as it
    ends. Returns False when a test took it down and others may wait."""
    env, cell, log = session.env, session.cell, scratch / "cell.log"
    events_path = scratch / "events.jsonl"
    lists = _listed(scratch, "only", only) + _listed(scratch, "done", done)
    # The suite's own plugins load as under bare pytest (autoload on: "" is unset to pytest).
    variables = {**cell_variables(cell, gpu, session.place["node"]),
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "", **dict(suite.env)}
    timeout = suite.timeout or env.spec.timeout
    request = LaunchRequest(
        argv=suite_argv(suite, events_path, lists, workers), env=variables,
        cwd=scratch, log=log, work_dir=scratch, cases_dir=scratch, gpu=gpu, timeout=timeout,
        memory=memory_bytes(env.spec.memory) if env.spec.memory else None,
        # A container sees the suite's folder (from its rootdir) at its own path; cwd stays
        # the empty scratch folder, so nothing there shadows imports.
        mounts=(rootdir(Path(suite.path)),) if suite.path is not None else ())
    watch = Watch(events_path, timeout)

    def tick() -> Iterator[CellRun]:
        session.take(watch)
        yield from session.fresh(read_log(log))

    def settled() -> bool:
        every = only if only is not None else session.collected
        return (bool(session.collected) and watch.current is None
                and all(n in session.children for n in every))

    ended = yield from watch_process(backend, env, request, watch, guard, tick=tick,
                                     settled=settled)
    if ended.failed is not None:  # it never started, or its machine was lost
        session.failure = classify(ended.failed)
        return True
    session.take(watch)
    if watch.ended:
        session.exitstatus = watch.exitstatus
    current = watch.current
    if current is not None:  # a test took the process down, or hung
        session.add(current, classify(ended.ending("died")), pytest_word="error",
                    hardware=watch.hardware, duration=round(watch.since_start(current), 3))
    yield from session.fresh(read_log(log))
    if current is not None:
        return False
    # No test running: before it collected, or killed from outside (a signal, its memory
    # limit) with tests left; an exit of its own after collecting is pytest's (``-x``).
    killed = ended.killed is None and (ended.code < 0 or ended.oom) and not settled()
    if not session.collected or killed:
        session.failure = classify(ended.ending("session_died", reason=tail(log),
                                                collected=bool(session.collected)))
    return True


def _listed(scratch: Path, name: str, nodeids: list[str] | None) -> list[str]:
    """The plugin's ``--harness-suite-{name}``: ``nodeids`` as a JSON list in ``scratch``."""
    if nodeids is None:
        return []
    path = scratch / f"{name}.json"
    path.write_text(json.dumps(nodeids), encoding="utf-8")
    return [f"--harness-suite-{name}={path}"]

"""A test suite's session cell, on the machine that runs it: the whole suite in one pytest
process in the environment, one result per test.

Collection happens there, in the environment, with the matrix's ``env:``: the tests that
exist are that environment's. A test that crashes or hangs its process is that test's CRASH
or TIMEOUT, and the tests it did not reach run on in a fresh process (``--harness-suite-only``),
as a batch of cases does. The session's own result sums its tests up; each test's result has
its own cell id and names the session as its ``parent``.

Each test's run is yielded as it ends (within a second), ahead of the session's, so the driver
records it then: a harness killed in the middle of a suite keeps every test that ended.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.matrix import SuiteSpec, memory_bytes
from harness.core.reaper import scratch_prefix
from harness.core.results import CellResult, CellRun, Outcome
from harness.envs import Backend, Environment, LaunchRequest
from harness.plan import collected
from harness.plan.cells import Cell
from harness.plan.suites import rootdir, suite_cell_id
from harness.run.classify import Decision, Ending, classify
from harness.run.process import watch_process
from harness.run.supervise import ProcessGuard
from harness.run.watch import Watch, cell_variables, read_log, tail

MAX_PROCESSES = 50  # a suite that crashes its process this often has told us enough
LOG_EVERY = 5.0  # seconds between rewrites of a running session's log


def suite_argv(suite: SuiteSpec, events: Path, only: Path | None,
               done: Path | None = None, workers: int = 1) -> tuple[str, ...]:
    """pytest's arguments for ``suite``: the harness's plugin, the installed package ahead of
    the suite's folder on ``sys.path`` (``--import-mode=append``, unless the suite's args
    choose a mode), and no cache written into the suite's folder. ``only``: the node ids to
    run; ``done``: the (stable) node ids a resumed session recorded already, not run again;
    ``workers``: pytest-xdist's ``-n`` (1: none)."""
    argv = ["-m", "pytest", "-p", "harness_suite", "-p", "no:cacheprovider", "-q", "-rN",
            "--continue-on-collection-errors", f"--harness-suite-events={events}"]
    if not any(a.startswith("--import-mode") for a in suite.args):
        argv.append("--import-mode=append")
    argv += [f"--harness-suite-package={p}" for p in suite.packages]
    if suite.path is not None:
        argv.append(f"--rootdir={rootdir(Path(suite.path))}")
    if only is not None:
        argv.append(f"--harness-suite-only={only}")
    if done is not None:
        argv.append(f"--harness-suite-done={done}")
    if workers > 1:
        argv += ["-n", str(workers)]
    argv += list(suite.args)
    argv += [suite.path] if suite.path is not None else ["--pyargs", str(suite.pyargs)]
    return tuple(argv)


def stable_nodeid(nodeid: str) -> str:
    """A node id as the record keeps it: the same on every machine. An installed package's
    tests (``--pyargs``) are named from the package, not from the environment's path."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in nodeid:
            return nodeid.split(marker, 1)[1]
    return nodeid


def iter_session(cell: Cell, env: Environment, backend: Backend, gpu: int | None, *,
                 guard: ProcessGuard | None, place: dict[str, Any],
                 scratch_root: Path | None = None, workers: int = 1) -> Iterator[CellRun]:
    """Run the suite of ``cell`` to its end, yielding each test's run as it ends, then the
    session's own. ``workers``: the CPU slots the session holds, for pytest-xdist (up to the
    suite's ``workers``). Raises only ``Cancelled``."""
    suite = cell.case.suite
    assert suite is not None
    session = _Session(cell, env, place)
    only: list[str] | None = None  # None: every test pytest collects
    # Resumed: the tests already recorded are deselected in the first process (the next
    # ones are given their list); the session counts them as they were.
    done: list[str] | None = [r.nodeid for r in cell.resumed] or None
    # What it collects is kept under the suite's files as they are now, before it starts.
    kept_as = None if cell.resumed else collected.key(env.spec, suite, cell.hardware)
    processes = 0
    while processes < MAX_PROCESSES:
        processes += 1
        scratch = Path(tempfile.mkdtemp(prefix=scratch_prefix(cell.cell_id), dir=scratch_root))
        try:
            ended = yield from _one_process(session, suite, backend, gpu, scratch, guard, only,
                                            done if processes == 1 else None,
                                            max(1, min(workers, suite.workers)))
            session.log += read_log(scratch / "cell.log")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if ended:  # it reached no test, or every test it was given ran
            break
        only = [n for n in session.collected if n not in session.children]
        if not only:
            break
    yield from session.fresh(b"")  # a test the last process's end settled
    if session.failure is None and (session.collected or session.collect_errors):
        # What ``harness plan`` says this session will run, until the suite or the
        # environment changes (a resumed session's first process skipped the tests done:
        # it keeps none).
        collected.save(kept_as, env.spec, suite, [stable_nodeid(n) for n in session.collected],
                       len(session.collect_errors), cache_dir=backend.cache_dir)
    yield CellRun(result=session.summary(processes), log=session.log, log_name=session.log_name,
                  fingerprint=env.fingerprint)


class _Session:
    """What the suite's processes have said so far, across processes."""

    def __init__(self, cell: Cell, env: Environment, place: dict[str, Any]) -> None:
        self.cell, self.env, self.place = cell, env, place
        # One of each for all its tests: the record names a fingerprint it met already
        # without encoding it again.
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
        self.decided: dict[tuple[str, str], Decision] = {}  # (outcome, reason) -> classified
        # A resumed session's tests recorded before: counted as they are, never run again
        # (keyed by their stable node id: pytest never names them in this session).
        for done in cell.resumed:
            self.children[done.nodeid] = CellRun(result=done)
            self.sent.add(done.nodeid)
        # A resumed session writes a log of its own: the tests recorded before point at the
        # log of the part that ran them. The count of tests done names each part.
        self.log_name = (f"{cell.cell_id}.from-{len(cell.resumed)}" if cell.resumed
                         else cell.cell_id)

    def fresh(self, current_log: bytes) -> Iterator[CellRun]:
        """The tests that ended since the last call, in pytest's order. The first carries the
        session's log so far, at most every LOG_EVERY seconds (the others point at the same
        file): a test's log link works while the suite runs, and a chatty suite's log is not
        rewritten once per test."""
        new = [n for n in self.order() if n not in self.sent]
        attach = bool(new) and time.monotonic() - self.log_sent_at >= LOG_EVERY
        for i, nodeid in enumerate(new):
            self.sent.add(nodeid)
            run = self.children[nodeid]
            if i == 0 and attach:
                self.log_sent_at = time.monotonic()
                run = replace(run, log=self.log + current_log)
            yield run

    def order(self) -> list[str]:
        """The tests that ended: in pytest's collection order, then any it did not collect
        (a collection error's module, a resumed session's), as they ended. Linear: a suite of
        thousands of tests asks this every second."""
        known = [n for n in self.collected if n in self.children]
        placed = set(known)
        return known + [n for n in self.children if n not in placed]

    def absorb(self, watch: Watch) -> None:
        for event in watch.events[watch.absorbed:]:
            kind = event.get("event")
            if kind == "collected" and not self.collected:
                self.collected = [str(n) for n in event.get("nodeids", [])]
                self.imported = list(event.get("imported", []))
            elif kind == "collect_error":
                nodeid = str(event.get("nodeid", ""))
                if nodeid not in self.collect_errors:
                    self.collect_errors[nodeid] = str(event.get("reason", ""))
                    self.add(nodeid, Outcome.ERROR, "collection failed: " + str(
                        event.get("reason", "")), pytest_word="error")
        watch.absorbed = len(watch.events)

    def finished(self, nodeid: str, finish: dict[str, Any], watch: Watch) -> None:
        ending = (finish["outcome"], str(finish.get("reason", "")))
        decision = self.decided.get(ending)
        if decision is None:  # each way a test ends classified once (thousands pass alike)
            decision = self.decided[ending] = classify(Ending(
                kind="finished", reported=Outcome(ending[0]), reason=ending[1],
                memory=self.env.spec.memory))
        details = {"pytest": finish.get("pytest")}
        if finish.get("worker"):  # the pytest-xdist worker that ran it
            details["worker"] = finish["worker"]
        if finish.get("traceback"):
            details["traceback"] = finish["traceback"]
        self.add(nodeid, decision.outcome, decision.reason, pytest_word=finish.get("pytest"),
                 hardware=watch.hardware, details=details,
                 duration=round(float(finish.get("duration", 0.0)), 3),
                 finished_at=float(finish.get("time") or time.time()))

    def died(self, nodeid: str, returncode: int, watch: Watch) -> None:
        decision = classify(Ending(kind="died", returncode=returncode,
                                   timed_out=watch.timed_out, oom=watch.oom,
                                   memory=self.env.spec.memory, timeout=watch.timeout))
        self.add(nodeid, decision.outcome, decision.reason, pytest_word="error",
                 hardware=watch.hardware, duration=round(watch.since_start(nodeid), 3))

    def add(self, nodeid: str, outcome: Outcome, reason: str, *, pytest_word: Any,
            **fields: Any) -> None:
        """A test's result. It keeps no events: its one event (how it ended) is its result."""
        cell, suite, name = self.cell, self.cell.case.case_id, stable_nodeid(nodeid)
        fields.setdefault("finished_at", time.time())
        fields.setdefault("details", {"pytest": pytest_word})
        result = self._result(
            cell_id=suite_cell_id(self.env.spec, suite, name, cell.hardware), case_id=suite,
            variant=name, nodeid=name, outcome=outcome, reason=reason, parent=cell.cell_id,
            **fields)
        # Not the build's carrier (``run.cell._built_once`` marks the first run it yields).
        self.children[nodeid] = CellRun(result=result, log_name=self.log_name, env_built=False)

    def summary(self, processes: int) -> CellResult:
        """The session's own result: FAIL when a test failed or did not collect, ERROR when
        the suite never collected or imported the package under test from elsewhere."""
        outcomes = Counter(run.result.outcome for run in self.children.values())
        # pytest's own words (passed, failed, xfailed...), counted as its summary line does
        counts = Counter(str(run.result.details.get("pytest") or run.result.outcome.lower())
                         for run in self.children.values())
        shadowed = [i for i in self.imported if not i.get("installed")]
        words = ", ".join(f"{n} {w}" for w, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        decision = self.failure or classify(Ending(
            kind="session_ended", reason=words, tests=len(self.children),
            failed=any(o.failed for o in outcomes),
            shadowed="; ".join(
                f"{i['name']} did not import: {i['error']}" if i.get("error") else
                f"{i['name']} was imported from {i.get('file')}, not from the environment's "
                "site-packages (the suite's folder shadows the installed package)"
                for i in shadowed)))
        outcome, reason = decision.outcome, decision.reason
        if processes > 1:
            reason += f" ({processes} pytest processes: a test took one down)"
        resumed = len(self.cell.resumed)
        if resumed:
            reason += f" ({resumed} recorded before the run was resumed)"
        details = {"suite": {"collected": len(self.collected) + resumed, "counts": dict(counts),
                             "outcomes": {str(o): n for o, n in outcomes.items()},
                             "collect_errors": self.collect_errors,
                             "imported": self.imported, "processes": processes,
                             "resumed": resumed,
                             "pytest_exit": self.exitstatus}}
        case = self.cell.case
        return self._result(
            cell_id=self.cell.cell_id, case_id=case.case_id, variant=case.variant,
            nodeid=case.nodeid, outcome=outcome, reason=reason, details=details,
            duration=round(time.time() - self.started_at, 3), finished_at=time.time(),
            infra=decision.infra)

    def _result(self, **fields: Any) -> CellResult:
        """A result in this session's environment, on its hardware, where it ran."""
        spec = self.env.spec
        return CellResult(environment=spec.name, values=self.values, env_key=spec.key,
                          backend=spec.backend, hardware_target=self.cell.hardware,
                          fingerprint=self.fingerprint, **fields, **self.place)


def _one_process(session: _Session, suite: SuiteSpec, backend: Backend, gpu: int | None,
                 scratch: Path, guard: ProcessGuard | None, only: list[str] | None,
                 done: list[str] | None, workers: int) -> Generator[CellRun, None, bool]:
    """One pytest process over the suite (or the tests in ``only``), yielding each test as it
    ends. Returns True when it needs no successor (it ran every test it was given, or reached
    none); False when a test took it down and others may wait."""
    env, cell = session.env, session.cell
    events_path = scratch / "events.jsonl"
    only_path, done_path = _listed(scratch / "only.txt", only), _listed(scratch / "done.txt", done)
    # The suite's own plugins load as under bare pytest (autoload on: "" is unset to pytest).
    variables = {**cell_variables(cell, gpu, session.place["node"]),
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "", **dict(suite.env)}
    timeout = suite.timeout or env.spec.timeout
    request = LaunchRequest(
        argv=suite_argv(suite, events_path, only_path, done_path, workers), env=variables,
        cwd=scratch,
        log=scratch / "cell.log", work_dir=scratch, cases_dir=scratch, gpu=gpu,
        timeout=timeout, memory=memory_bytes(env.spec.memory) if env.spec.memory else None,
        # A container sees the suite's folder (from its rootdir: its conftest and config) at
        # its own path; cwd stays the empty scratch folder, so nothing there shadows imports.
        mounts=(rootdir(Path(suite.path)),) if suite.path is not None else ())
    try:
        process = backend.launch(env, request)
    except (OSError, HarnessError) as exc:
        session.failure = classify(Ending(kind="cannot_start", reason=str(exc)))
        return True
    log = scratch / "cell.log"
    watch = Watch(events_path, timeout)

    def tick() -> Iterator[CellRun]:
        _take(session, watch)
        yield from session.fresh(read_log(log))

    def settled() -> bool:
        every = only if only is not None else session.collected
        return (bool(session.collected) and watch.current is None
                and all(n in session.children for n in every))

    ended = yield from watch_process(process, watch, guard, tick=tick, settled=settled)
    if ended.lost:
        session.failure = classify(Ending(kind="machine_lost", reason=ended.lost))
        return True
    _take(session, watch)
    if watch.ended:
        session.exitstatus = watch.exitstatus
    if watch.current is not None:  # a test took the process down, or hung
        session.died(watch.current, ended.code, watch)
        yield from session.fresh(read_log(log))
        return False
    yield from session.fresh(read_log(log))
    # With no test running: before it collected, or killed from outside (a signal, its
    # memory limit) with tests left to run. An exit of its own after collecting is pytest's
    # (``-x``, ``--maxfail``): the tests it ran say it all.
    killed = ended.killed is None and (ended.code < 0 or watch.oom) and not settled()
    if not session.collected or killed:
        session.failure = classify(Ending(
            kind="session_died", returncode=ended.code, timed_out=watch.timed_out,
            oom=watch.oom, memory=env.spec.memory, timeout=timeout, reason=tail(log),
            collected=bool(session.collected)))
    return True


def _listed(path: Path, nodeids: list[str] | None) -> Path | None:
    """``nodeids`` written one a line to ``path`` for the plugin; None for none given."""
    if nodeids is None:
        return None
    path.write_text("\n".join(nodeids) + "\n", encoding="utf-8")
    return path


def _take(session: _Session, watch: Watch) -> None:
    finishes = watch.read()
    session.absorb(watch)
    for nodeid, finish in finishes:
        session.finished(nodeid, finish, watch)

"""The one place where how a cell ended (an ``Ending``, described by whoever watched it)
becomes its outcome: a table, first matching row wins. An ``infra`` result is the machine's
fault, not the case's: the driver runs it again (``next_try``)."""

from __future__ import annotations

import functools
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from harness.core.results import CellResult, Outcome

#: How an attempt ended; ``ROWS`` says what each means.
Kind = Literal["finished", "died", "never_started", "cannot_start", "machine_lost", "not_realized",
               "cancelled", "executor_lost", "executor_failed", "missing_shard", "hardware_absent",
               "session_died", "session_ended", "collect_error"]

MEMORY_ERROR = re.compile(r"\w*MemoryError\b")  # MemoryError, numpy's _ArrayMemoryError


@dataclass(frozen=True, kw_only=True)
class Ending:
    """How one attempt at a cell ended, as its watcher saw it."""

    kind: Kind
    reported: Outcome | None = None  # finished: the plugin's outcome
    reason: str = ""  # finished: the plugin's reason; otherwise the error's text
    returncode: int | None = None  # died, never_started: the process's exit status
    timed_out: bool = False  # killed for passing the environment's timeout
    oom: bool = False  # the backend saw its memory limit kill the process
    memory: str | None = None  # the environment's memory limit ("16g")
    timeout: float = 0.0  # the environment's timeout, seconds
    shard: str | None = None  # missing_shard: which shard ("2/8"); reason, if it reported at all
    hardware: str = ""  # hardware_absent: what the cell needs
    present: str = ""  # hardware_absent: the GPUs this machine has
    collected: bool = False  # session_died: the suite was collected before it died
    tests: int = 0  # session_ended: how many tests ended
    failed: bool = False  # session_ended: one of them failed or did not collect
    shadowed: str = ""  # session_ended: the package under test came from elsewhere


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    infra: bool = False  # the machine failed, not the case: run it again


@dataclass(frozen=True)
class Row:
    name: str
    kind: Kind
    applies: Callable[[Ending], bool] | None  # None: every end of its kind
    decide: Callable[[Ending], Decision]


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _out_of_memory(e: Ending) -> bool:
    # Under the environment's limit an allocation fails instead of taking the machine.
    return (e.reported is Outcome.FAIL and bool(e.memory)
            and MEMORY_ERROR.match(e.reason) is not None)


KILLED, OUT_OF_MEMORY = "process killed by ", "out of memory "


def _killed(e: Ending) -> str:
    return f"{KILLED}{_signal_name(-(e.returncode or 0))}"


def _oom(e: Ending) -> str:
    return f"{OUT_OF_MEMORY}(memory: {e.memory})"


#: Every way a cell can end, in the order they are tried. ``tests/run/test_classify.py`` has
#: a test per row.
ROWS: tuple[Row, ...] = (
    Row("finished: a memory error under the environment's limit", "finished", _out_of_memory,
        lambda e: Decision(Outcome.CRASH,
                           f"{_oom(e)}: {e.reason}"[:400])),
    Row("finished: as the plugin reported", "finished", lambda e: e.reported is not None,
        lambda e: Decision(e.reported or Outcome.ERROR, e.reason)),
    Row("died: past the timeout", "died", lambda e: e.timed_out,
        lambda e: Decision(Outcome.TIMEOUT,
                           f"no result after {e.timeout:g} s; process group killed")),
    Row("died: killed by the memory limit", "died", lambda e: e.oom,
        lambda e: Decision(Outcome.CRASH, _oom(e))),
    Row("died: killed by a signal", "died", lambda e: (e.returncode or 0) < 0,
        lambda e: Decision(Outcome.CRASH, _killed(e))),
    Row("died: exited in the middle of the case", "died", None,
        lambda e: Decision(Outcome.CRASH, f"process exited with code {e.returncode} in the "
                                          "middle of the case")),
    Row("never started: hung in import or collection", "never_started", lambda e: e.timed_out,
        lambda e: Decision(Outcome.TIMEOUT,
                           f"no result after {e.timeout:g} s; process group killed "
                           "(still starting: import or collection hung)")),
    Row("never started: pytest exited first", "never_started", None,
        lambda e: Decision(Outcome.ERROR, f"pytest exited {e.returncode} before the case "
                                          f"started: {e.reason}")),
    Row("session died: hung before it collected the suite", "session_died",
        lambda e: e.timed_out and not e.collected,
        lambda e: Decision(Outcome.ERROR, f"collecting the suite took over {e.timeout:g} s")),
    Row("session died: killed by the memory limit (no test running)", "session_died",
        lambda e: e.oom,
        lambda e: Decision(Outcome.ERROR, f"{_oom(e)} with no test running", infra=True)),
    Row("session died: killed by a signal (no test running)", "session_died",
        lambda e: (e.returncode or 0) < 0,
        lambda e: Decision(Outcome.ERROR, (f"{_killed(e)} with no test running"
                                           + (f": {e.reason}" if e.reason else ""))[:600],
                           infra=True)),
    Row("session died: pytest exited before it collected the suite", "session_died", None,
        lambda e: Decision(Outcome.ERROR, f"pytest ended (exit {e.returncode}) before it "
                                          f"collected the suite: {e.reason}")),
    Row("session ended: the package under test came from elsewhere", "session_ended",
        lambda e: bool(e.shadowed),
        lambda e: Decision(Outcome.ERROR, e.shadowed)),
    Row("session ended: a test failed or did not collect", "session_ended", lambda e: e.failed,
        lambda e: Decision(Outcome.FAIL, e.reason)),
    Row("session ended: no test", "session_ended", lambda e: e.tests == 0,
        lambda e: Decision(Outcome.ERROR, "the suite collected no test")),
    Row("session ended: every test fine", "session_ended", None,
        lambda e: Decision(Outcome.PASS, e.reason)),
    Row("collect error: a suite's module did not collect", "collect_error", None,
        lambda e: Decision(Outcome.ERROR, f"collection failed: {e.reason}")),
    Row("cannot start: the machine could not launch it", "cannot_start", None,
        lambda e: Decision(Outcome.ERROR, f"cannot start: {e.reason}", infra=True)),
    Row("machine lost while the case ran", "machine_lost", None,
        lambda e: Decision(Outcome.ERROR, e.reason, infra=True)),
    Row("environment not realized", "not_realized", None,
        lambda e: Decision(Outcome.ERROR, e.reason)),
    Row("cancelled by the executor", "cancelled", None,
        lambda e: Decision(Outcome.ERROR, "cancelled by the executor", infra=True)),
    Row("the executor lost the task", "executor_lost", None,
        lambda e: Decision(Outcome.ERROR, e.reason, infra=True)),
    Row("the executor failed (a harness bug)", "executor_failed", None,
        lambda e: Decision(Outcome.ERROR, f"executor failed: {e.reason}")),
    Row("a shard never reported", "missing_shard", None,
        lambda e: Decision(Outcome.MISSING, "no result: "
                           + (f"shard {e.shard}" if e.shard else
                              "the shard that should have run it")
                           + f" {e.reason or 'never reported (its artifact is missing)'}")),
    Row("the cell's hardware is not here", "hardware_absent", None,
        lambda e: Decision(Outcome.NOT_RUN, f"needs {e.hardware}; GPUs here: {e.present}")),
)


@functools.lru_cache(maxsize=1024)  # a suite's thousands of tests end in a few ways
def classify(ending: Ending) -> Decision:
    """The outcome of ``ending``: the first row of ``ROWS`` that applies."""
    for row in ROWS:
        if row.kind == ending.kind and (row.applies is None or row.applies(ending)):
            return row.decide(ending)
    raise ValueError(f"no row classifies {ending}")  # a kind added without its row: a bug


Retry = Literal["machine", "case"]
#: How an infra result whose machine is still there begins: a session's process that died
#: with no test running, said as a case cell's would be (``_killed``, ``_oom``).
NOT_LOST = (KILLED, OUT_OF_MEMORY)


def next_try(result: CellResult, *, machine_losses: int, case_tries: int, retries: int,
             case_retries: int) -> Retry | None:
    """Whether to run the cell again: its machine failed (``infra``, up to ``retries``
    times), or the case failed and its environment allows ``case_retries`` more tries."""
    if result.infra:
        return "machine" if machine_losses < retries else None
    if result.outcome.failed and case_tries < case_retries:
        return "case"
    return None


def flaky(result: CellResult, first: CellResult) -> CellResult:
    """A case that failed and then passed: neither a pass nor a failure, and shown so."""
    return result.replace(outcome=Outcome.FLAKY,
                          reason=(f"{result.outcome} on attempt {result.attempt} after "
                                  f"{first.outcome} on attempt {first.attempt}: "
                                  f"{first.reason}")[:600])

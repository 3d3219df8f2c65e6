"""The one classifier: a test per row of its table, and the retry and FLAKY decisions."""

from __future__ import annotations

import signal

import pytest

from harness.core.results import CellResult, Outcome
from harness.run.classify import ROWS, Decision, Ending, classify, flaky, next_try

CASES: list[tuple[str, Ending, Decision]] = [
    ("finished: a memory error under the environment's limit",
     Ending(kind="finished", reported=Outcome.FAIL, memory="256m",
            reason="MemoryError: cannot allocate"),
     Decision(Outcome.CRASH, "out of memory (memory: 256m): MemoryError: cannot allocate")),
    ("finished: as the plugin reported",
     Ending(kind="finished", reported=Outcome.REPRODUCED, reason="boom"),
     Decision(Outcome.REPRODUCED, "boom")),
    ("died: past the timeout",
     Ending(kind="died", returncode=-9, timed_out=True, timeout=30.0),
     Decision(Outcome.TIMEOUT, "no result after 30 s; process group killed")),
    ("died: killed by the memory limit",
     Ending(kind="died", returncode=-9, oom=True, memory="1g"),
     Decision(Outcome.CRASH, "out of memory (memory: 1g)")),
    ("died: killed by a signal",
     Ending(kind="died", returncode=-int(signal.SIGSEGV)),
     Decision(Outcome.CRASH, "process killed by SIGSEGV")),
    ("died: exited in the middle of the case",
     Ending(kind="died", returncode=3),
     Decision(Outcome.CRASH, "process exited with code 3 in the middle of the case")),
    ("never started: hung in import or collection",
     Ending(kind="never_started", returncode=-9, timed_out=True, timeout=5.0),
     Decision(Outcome.TIMEOUT, "no result after 5 s; process group killed (still starting: "
                               "import or collection hung)")),
    ("never started: pytest exited first",
     Ending(kind="never_started", returncode=4, reason="ERROR: file not found"),
     Decision(Outcome.ERROR, "pytest exited 4 before the case started: ERROR: file not found")),
    ("session died: hung before it collected the suite",
     Ending(kind="session_died", returncode=-9, timed_out=True, timeout=60.0),
     Decision(Outcome.ERROR, "collecting the suite took over 60 s")),
    ("session died: killed by the memory limit (no test running)",
     Ending(kind="session_died", returncode=-9, oom=True, memory="2g", collected=True),
     Decision(Outcome.ERROR, "out of memory (memory: 2g) with no test running", infra=True)),
    ("session died: killed by a signal (no test running)",
     Ending(kind="session_died", returncode=-int(signal.SIGKILL), reason="collecting ..."),
     Decision(Outcome.ERROR, "process killed by SIGKILL with no test running: collecting ...",
              infra=True)),
    ("session died: pytest exited before it collected the suite",
     Ending(kind="session_died", returncode=4, reason="ERROR: no such file"),
     Decision(Outcome.ERROR, "pytest ended (exit 4) before it collected the suite: "
                             "ERROR: no such file")),
    ("session ended: the package under test came from elsewhere",
     Ending(kind="session_ended", tests=3, failed=True, shadowed="yaml was imported from x"),
     Decision(Outcome.ERROR, "yaml was imported from x")),
    ("session ended: a test failed or did not collect",
     Ending(kind="session_ended", tests=3, failed=True, reason="2 passed, 1 failed"),
     Decision(Outcome.FAIL, "2 passed, 1 failed")),
    ("session ended: no test",
     Ending(kind="session_ended"),
     Decision(Outcome.ERROR, "the suite collected no test")),
    ("session ended: every test fine",
     Ending(kind="session_ended", tests=3, reason="2 passed, 1 skipped"),
     Decision(Outcome.PASS, "2 passed, 1 skipped")),
    ("collect error: a suite's module did not collect",
     Ending(kind="collect_error", reason="ImportError: No module named 'x'"),
     Decision(Outcome.ERROR, "collection failed: ImportError: No module named 'x'")),
    ("cannot start: the machine could not launch it",
     Ending(kind="cannot_start", reason="container exited"),
     Decision(Outcome.ERROR, "cannot start: container exited", infra=True)),
    ("machine lost while the case ran",
     Ending(kind="machine_lost", reason="the Docker engine stopped answering"),
     Decision(Outcome.ERROR, "the Docker engine stopped answering", infra=True)),
    ("environment not realized",
     Ending(kind="not_realized", reason="uv pip failed"),
     Decision(Outcome.ERROR, "uv pip failed")),
    ("cancelled by the executor",
     Ending(kind="cancelled"),
     Decision(Outcome.ERROR, "cancelled by the executor", infra=True)),
    ("the executor lost the task",
     Ending(kind="executor_lost", reason="Ray lost the cell's task: NodeDiedError"),
     Decision(Outcome.ERROR, "Ray lost the cell's task: NodeDiedError", infra=True)),
    ("the executor failed (a harness bug)",
     Ending(kind="executor_failed", reason="KeyError: 'x'"),
     Decision(Outcome.ERROR, "executor failed: KeyError: 'x'")),
    ("a shard never reported",
     Ending(kind="missing_shard", shard="2/8"),
     Decision(Outcome.MISSING, "no result: shard 2/8 never reported (its artifact is missing)")),
    ("the cell's hardware is not here",
     Ending(kind="hardware_absent", hardware="sm_90", present="none"),
     Decision(Outcome.NOT_RUN, "needs sm_90; GPUs here: none")),
]


def test_every_row_has_its_test() -> None:
    assert [name for name, _, _ in CASES] == [row.name for row in ROWS]


@pytest.mark.parametrize(("ending", "decision"), [(e, d) for _, e, d in CASES],
                         ids=[name for name, _, _ in CASES])
def test_each_row(ending: Ending, decision: Decision) -> None:
    assert classify(ending) == decision


def test_a_memory_error_without_a_limit_is_the_case_failing() -> None:
    ending = Ending(kind="finished", reported=Outcome.FAIL, reason="MemoryError: x")
    assert classify(ending) == Decision(Outcome.FAIL, "MemoryError: x")


def test_a_missing_shard_without_its_name_says_which_should_have() -> None:
    assert classify(Ending(kind="missing_shard")).reason == (
        "no result: the shard that should have run it never reported (its artifact is "
        "missing)")


def result(outcome: Outcome, *, infra: bool = False, attempt: int = 1,
           reason: str = "") -> CellResult:
    return CellResult(run_id="r", cell_id="c", environment="e", values={}, env_key="k",
                      backend="uv", case_id="case", variant="v", nodeid="n",
                      hardware_target="cpu", outcome=outcome, infra=infra, attempt=attempt,
                      reason=reason)


@pytest.mark.parametrize(("given", "losses", "tries", "case_retries", "want"), [
    (result(Outcome.ERROR, infra=True), 0, 0, 0, "machine"),  # a lost machine: again
    (result(Outcome.ERROR, infra=True), 2, 0, 5, None),  # ... up to --retries
    (result(Outcome.FAIL), 0, 0, 1, "case"),  # the environment's `retries:`
    (result(Outcome.CRASH), 0, 1, 1, None),  # ... used up
    (result(Outcome.FAIL), 0, 0, 0, None),  # none allowed
    (result(Outcome.PASS), 0, 0, 3, None),  # nothing to retry
])
def test_next_try(given: CellResult, losses: int, tries: int, case_retries: int,
                  want: str | None) -> None:
    assert next_try(given, machine_losses=losses, case_tries=tries, retries=2,
                    case_retries=case_retries) == want


def test_failed_then_passed_is_flaky() -> None:
    first = result(Outcome.FAIL, reason="AssertionError: flipped")
    got = flaky(result(Outcome.PASS, attempt=2), first)
    assert got.outcome is Outcome.FLAKY
    assert got.reason == "PASS on attempt 2 after FAIL on attempt 1: AssertionError: flipped"

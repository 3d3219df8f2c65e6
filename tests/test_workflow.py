"""harness/workflow.py: the run as a chain of steps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.workflow import RunOptions, RunState, execute


class Closing:
    """An executor stand-in that says whether the chain shut it down."""

    closed = False

    def shutdown(self, *, cancel: bool = False) -> None:
        self.closed = True


def test_a_step_that_returns_an_int_ends_the_run_with_it() -> None:
    seen: list[str] = []
    executor = Closing()

    def first(state: RunState) -> RunState:
        seen.append("first")
        return replace(state, executor=executor)  # type: ignore[arg-type]

    def stop(state: RunState) -> int:
        seen.append("stop")
        return 7

    def never(state: RunState) -> RunState:
        seen.append("never")
        return state

    assert execute(RunState(options=RunOptions()), (first, stop, never)) == 7
    assert seen == ["first", "stop"]
    assert executor.closed  # shut down whatever ended the chain


def test_the_executor_is_shut_down_when_a_step_raises() -> None:
    executor = Closing()

    def first(state: RunState) -> RunState:
        return replace(state, executor=executor)  # type: ignore[arg-type]

    def boom(state: RunState) -> RunState:
        raise RuntimeError("a bug in a step")

    with pytest.raises(RuntimeError):
        execute(RunState(options=RunOptions()), (first, boom))
    assert executor.closed

"""A suite session's order of the tests that ended (``_Session.order``): pytest's collection
order, then the tests it did not collect; work that grows with the tests, not their square."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.results import CellRun
from harness.run.suite import _Session
from tests.conftest import ROOT

INENV = ROOT / "harness" / "inenv"


class CountedId(str):
    """A node id that counts how often it is hashed (each set or dict look-up hashes it)."""

    hashed = 0

    def __hash__(self) -> int:
        CountedId.hashed += 1
        return str.__hash__(self)


def session(collected: list[str], ended: list[str]) -> _Session:
    """A session's state alone (no process, no cell): what pytest collected, what ended."""
    state = _Session.__new__(_Session)
    state.collected = collected
    state.children = dict.fromkeys(ended, CellRun.__new__(CellRun))
    return state


def test_order_is_collection_order_then_the_uncollected_as_they_ended() -> None:
    state = session(["a", "b", "c", "d"], ["c", "x", "a", "y", "d"])
    assert state.order() == ["a", "c", "d", "x", "y"]


def test_order_hashes_each_test_a_few_times_not_once_per_other_test() -> None:
    tests = 4000
    ids = [CountedId(f"test_m.py::test_{i}") for i in range(tests)]
    # Every test ended; a tenth pytest never collected (a resumed session's, say).
    state = session(ids[: tests - tests // 10], ids)
    CountedId.hashed = 0
    order = state.order()
    assert order == ids
    # A look-up or two per test; building the set of the known tests again for each test
    # hashed them tests**2 / 2 times (8 million here).
    assert CountedId.hashed <= 4 * tests, CountedId.hashed


EVENTS = """
import os, signal, sys
from harness_events import Events

events = Events(sys.argv[1])
for i in range(int(sys.argv[2])):
    events.write(event="finish", nodeid=f"t.py::test_{i}")
os.kill(os.getpid(), signal.SIGKILL)  # a test that takes its process down at once
"""


def test_the_events_a_test_process_wrote_survive_its_kill(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    proc = subprocess.run([sys.executable, "-c", EVENTS, str(events), "2000"],
                          env={**os.environ, "PYTHONPATH": str(INENV)}, check=False)
    assert proc.returncode == -signal.SIGKILL
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["nodeid"] for e in lines] == [f"t.py::test_{i}" for i in range(2000)]


def test_events_are_not_an_fsync_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two events a test: a suite of thousands of tests does not wait on the disk for each
    (the harness reading them runs on the same machine: the kernel has them)."""
    monkeypatch.syspath_prepend(str(INENV))
    from harness_events import Events

    calls: list[int] = []
    monkeypatch.setattr(os, "fsync", calls.append)
    events = Events(str(tmp_path / "events.jsonl"))
    for i in range(100):
        events.write(event="finish", nodeid=f"t.py::test_{i}")
    assert calls == []

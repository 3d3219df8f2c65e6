"""What the console says of an environment: built in this run, or up to date, never both."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from harness.core.results import CellResult, CellRun, Outcome
from harness.envs import Environment
from harness.matrix.load import parse_matrix
from harness.plan.cells import Cell, make_plan
from harness.run.dispatch import DispatchStats, _count_env
from harness.run.supervise import EnvCache
from tests.conftest import PY


def one_cell(tmp_path: Path) -> Cell:
    spec = parse_matrix(f"version: 1\nsuites: {{s: {{path: {tmp_path}}}}}\nenvironments:\n"
                        f"  e: {{backend: host, python: '{PY}', suites: [s]}}\n",
                        file="m.yaml", base=tmp_path)
    (cell,) = make_plan(spec, (), ("cpu",)).cells
    return cell


class Building:
    """A backend that builds its one environment (pure logic: EnvCache's bookkeeping)."""

    def __init__(self) -> None:
        self.calls = 0

    def realize(self, spec: Any) -> Environment:
        self.calls += 1
        return Environment(spec=spec, location="/e", python="/e/bin/python", fingerprint={},
                           built=True)


def test_every_batch_of_an_environment_built_in_this_process_says_so(tmp_path: Path) -> None:
    cell, backend, cache = one_cell(tmp_path), Building(), EnvCache()
    got: list[bool] = []
    batches = [threading.Thread(target=lambda: got.append(
        cache.realize(cell, backend).built)) for _ in range(4)]  # type: ignore[arg-type]
    for t in batches:
        t.start()
    for t in batches:
        t.join()
    assert backend.calls == 1 and got == [True] * 4


def test_built_is_said_once_and_up_to_date_never_for_a_built_environment(
        tmp_path: Path) -> None:
    """A batch that realized it later may end first: its cells must not make the console
    call the environment up to date before it says built."""
    cell = one_cell(tmp_path)
    result = CellResult(run_id="r", cell_id="c", environment="e", values={}, env_key="k",
                        backend="host", case_id="s", variant="v", nodeid="n",
                        hardware_target="cpu", outcome=Outcome.PASS)
    notes: list[str] = []
    stats = DispatchStats()
    # batch B's first cell, B's second (reported once per batch), then A's first
    for built in (True, False, True):
        _count_env(stats, cell, CellRun(result=result, env_built=built), notes.append)
    assert notes == ["environment e: built"]
    assert stats.environments_line().startswith("environments: 1 built, 0 reused")

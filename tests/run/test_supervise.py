"""What the console says of an environment: built in this run, or up to date, never both."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core.errors import EnvImportError
from harness.core.results import CellResult, CellRun, Outcome
from harness.envs import Environment, Realizing
from harness.matrix.load import parse_matrix
from harness.plan.cells import Cell, make_plan
from harness.run.dispatch import DispatchStats, _count_env
from harness.run.supervise import EnvCache, Realized, settled
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

    def begin(self, spec: Any) -> Realizing:
        return Realizing(self.realize(spec))


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
    result = CellResult(run_id="r", cell_id="c", environment="e", values={}, env_key="k",
                        backend="host", case_id="s", variant="v", nodeid="n",
                        hardware_target="cpu", outcome=Outcome.PASS)
    notes: list[str] = []
    stats = DispatchStats()
    # batch B's first cell, B's second (reported once per batch), then A's first
    for built in (True, False, True):
        _count_env(stats, CellRun(result=result, env_built=built), notes.append)
    assert notes == ["environment e: built"]
    assert stats.environments_line().startswith("environments: 1 built, 0 reused")


class Checking:
    """A backend whose new environment is handed over before its check ends (pure logic)."""

    def __init__(self) -> None:
        self.checked: Future[Environment] = Future()
        self.env = Environment(spec=None, location="/e", python="/e/bin/python",  # type: ignore[arg-type]
                               built=True)

    def begin(self, spec: Any) -> Realizing:
        return Realizing(self.env, self.checked)


def test_once_the_check_ends_later_batches_get_what_it_said(tmp_path: Path) -> None:
    cell, cache = one_cell(tmp_path), EnvCache()
    good, bad = Checking(), Checking()
    first = cache.realize(cell, good)  # type: ignore[arg-type]
    assert first.checking is good.checked and first.env is good.env and first.built
    still = cache.realize(cell, good)  # type: ignore[arg-type]
    assert still.checking is good.checked  # still running: the same
    checked = replace(good.env, fingerprint={"python": PY})
    good.checked.set_result(checked)
    later = cache.realize(cell, good)  # type: ignore[arg-type]
    assert later.checking is None and later.env is checked and later.built
    assert settled(first) == later

    other = EnvCache()
    other.realize(cell, bad)  # type: ignore[arg-type]
    bad.checked.set_exception(EnvImportError("e was built but does not import: x: boom"))
    broken = other.realize(cell, bad)  # type: ignore[arg-type]
    assert broken.env is None and broken.error == "e was built but does not import: x: boom"
    bug = Checking()
    bug.checked.set_exception(KeyError("cuda_home"))
    assert settled(Realized(bug.env, built=True, checking=bug.checked)).error == (
        "backend bug while realizing the environment: KeyError: 'cuda_home'")

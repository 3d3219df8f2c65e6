"""One line per environment on the console: built if this run built it, up to date if no
batch of it did, whichever of its batches' cells the driver happens to read first."""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from harness.core.results import CellResult, CellRun, Outcome
from harness.matrix.load import parse_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import Cell, make_plan
from harness.run.cell import static_result
from harness.run.classify import Ending, classify
from harness.run.dispatch import dispatch
from tests.conftest import DATA, PY, write_matrix
from tests.packages import make_wheel
from tests.run.test_dispatch import harness

CASES = DATA / "behaviour"


def plan(tmp_path: Path, *keys: str) -> list[Cell]:
    """The cells ``keys`` name ("environment/variant"), of two host environments a and b."""
    spec = parse_matrix(f"version: 1\ncases_dir: {CASES}\nenvironments:\n"
                        f"  a: {{backend: host, python: '{PY}'}}\n"
                        f"  b: {{backend: host, python: '{PY}'}}\n", file="m.yaml", base=tmp_path)
    return [c for c in make_plan(spec, collect_cases(CASES), ("cpu",)).cells
            if f"{c.env.name}/{c.case.variant}" in keys]


class Store:
    run_id = "r"

    def record(self, run: CellRun) -> CellResult:
        return run.result

    def sync(self) -> None:
        """Nothing held to write: the results are kept in memory."""


class InOrder:
    """An executor that ends its cells one at a time, in the order given (pure logic: what
    the driver says of environments): each cell's run says whether its batch built the
    environment (True), found it ready (False), or could not have it (None)."""

    name = "in-order"
    queues = False
    targets = ("cpu",)
    serves = frozenset({"cpu"})
    capacity = 4

    def __init__(self, order: Sequence[tuple[str, bool | None]]) -> None:
        self.order = list(order)  # ("environment/variant", env_built), as the cells end
        self.futures: dict[str, tuple[Cell, Future[CellRun]]] = {}

    def slots_for(self, cell: Cell) -> int:
        return self.capacity

    def describe(self) -> dict[str, object]:
        return {"executor": self.name}

    def submit(self, cells: Sequence[Cell], *, run_id: str, attempt: int = 1, draws: int = 1
               ) -> list[Future[CellRun]]:
        out = []
        for cell in cells:
            future: Future[CellRun] = Future()
            self.futures[f"{cell.env.name}/{cell.case.variant}"] = (cell, future)
            out.append(future)
        if len(self.futures) == len(self.order):
            self.end_next()  # every cell is submitted: the first ends
        return out

    def end_next(self) -> None:
        """Ends the next cell: called once the driver has read the one before."""
        if not self.order:
            return
        key, built = self.order.pop(0)
        cell, future = self.futures[key]
        ending = (Ending(kind="finished", reported=Outcome.PASS) if built is not None
                  else Ending(kind="not_realized", reason="no python here"))
        future.set_result(CellRun(result=static_result(cell, classify(ending)),
                                  env_built=built))

    def partials(self) -> list[CellRun]:
        return []

    def shutdown(self, *, cancel: bool = False) -> None:
        pass


def console(tmp_path: Path, order: Sequence[tuple[str, bool | None]]) -> list[str]:
    """What the driver prints (environment notes, and each cell as it is read) when the
    cells end in ``order``."""
    cells = plan(tmp_path, *(key for key, _ in order))
    executor = InOrder(order)
    lines: list[str] = []

    def read(result: CellResult) -> None:
        lines.append(f"{result.environment}/{result.variant}")
        executor.end_next()

    dispatch(cells, executor, Store(), on_result=read, on_note=lines.append, batch=False)
    return lines


def test_a_batch_that_found_it_ready_ending_first_does_not_call_a_built_environment_up_to_date(
        tmp_path: Path) -> None:
    """Another process of the run built it: the batch that found it ready reports first."""
    lines = console(tmp_path, [("a/pass", False), ("a/wait_a", True), ("a/wait_b", False)])
    assert lines == ["a/pass", "environment a: built", "a/wait_a", "a/wait_b"]


def test_an_environment_no_batch_built_is_up_to_date_once_its_cells_have_ended(
        tmp_path: Path) -> None:
    lines = console(tmp_path, [("a/pass", False), ("b/pass", True), ("a/wait_a", False),
                               ("b/wait_a", False)])
    assert lines == ["a/pass", "environment b: built", "b/pass", "a/wait_a",
                     "environment a: up to date, nothing rebuilt", "b/wait_a"]


def test_an_environment_that_failed_after_one_batch_found_it_ready_says_its_error(
        tmp_path: Path) -> None:
    lines = console(tmp_path, [("a/pass", False), ("a/wait_a", None)])
    assert lines == ["a/pass", "environment a: ERROR no python here", "a/wait_a"]


def test_a_real_run_says_one_line_for_an_environment_it_built(tmp_path: Path) -> None:
    """Two processes draw one environment's cells (-j 2); its check imports slowly, so
    several cells end while it runs and reach the driver together, each process's first
    carrying the build."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "harness-slow", "1.0",
               {"harness_slow/__init__.py": "import time\ntime.sleep(5)\n"})
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {CASES}\ndefaults: {{timeout: 60}}\nenvironments:\n"
        "  fresh: {backend: uv, python: '@PY@', packages: [harness-slow]}\n"))
    for attempt in range(3):  # the order the driver reads cells that end together varies
        proc = harness(tmp_path, "run", "-m", str(m), "-j", "2", "--find-links", str(wheels),
                       "-k", "test_behaviour.py::test_[wpr]*",
                       env={"HARNESS_CACHE_DIR": str(tmp_path / f"cache{attempt}")})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        notes = re.findall(r"^environment fresh: .*$", proc.stdout + proc.stderr, re.M)
        assert notes == ["environment fresh: built"], proc.stdout + proc.stderr
        assert "environments: 1 built, 0 reused" in proc.stdout

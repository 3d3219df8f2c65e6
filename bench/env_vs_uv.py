"""A new uv environment, warm uv cache: the harness's realization against bare uv, same pins.

Times, for the pins of one environment of a matrix (by default the repository's
``cpu:torch=2.5.1,numpy>=2``: torch 2.5.1, transformers 4.46.3, numpy >= 2, Python 3.11),

  (a) bare uv: ``uv venv --python X DIR && uv pip install --python DIR/bin/python PINS``;
  (b) (a), then the first use of that environment: one interpreter importing the pins'
      modules, writing their bytecode as Python does by default (beside the sources);
  (c) the harness: ``UvBackend.begin(spec)``, what a run does for an environment it has not
      built yet, in a cache folder of its own (so it really builds), until its cells can
      start: the venv, the install (with pytest);
  (c') the same until the check that goes on beside those cells has ended: one interpreter
      that imports what the spec names (writing the bytecode) and reads the fingerprint,
      then the marker (what ``envs check --build`` waits for, and the cells' results);

and, end to end, what a user waits for before the first result of a case in a new environment:

  (d) bare uv and pytest: (a), then ``python -m pytest`` of one case (by default the numpy
      bridge probe, which imports torch and numpy) in it, with the case plugin on PYTHONPATH;
  (e) the harness: (c), then that case as a cell (``run.cell.iter_batch``: its pytest process,
      watched, its result classified);

each ``--repeat`` times, every one into a new folder (all removed at the end, so that no
deletion runs between timings), in pairs: (a)+(b) with (c), (d) with (e); which of a pair
goes first alternates from one repeat to the next, and so does which pair goes first. Prints
the medians, the ratios c/a (the issue's goal: <= 1.2), c'/b and e/d, and where the harness's
time went: each uv call and each interpreter start of the build, timed by wrapping the
functions ``harness.envs.uv`` calls them through (the build's own code is what runs). All
share uv's cache, warmed first by one untimed install of the pins and pytest. Nothing else
should run on the machine meanwhile; the load average is printed before and after.

    python bench/env_vs_uv.py [--repeat 3] [-m matrix.yaml] [--env 'cpu:torch=2.5.1,numpy>=2']
                              [--case 'test_probes.py::test_numpy_bridge']
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.core.matrix import EnvSpec, requirement_name
from harness.core.paths import INENV_DIR
from harness.envs import uv as uv_backend
from harness.matrix.load import load_matrix
from harness.plan.cases import collect_cases, pytest_args
from harness.plan.cells import Cell, make_plan
from harness.run.cell import iter_batch

ROOT = Path(__file__).resolve().parents[1]
#: What the build calls, by the name harness.envs.uv looks it up under (one that a version
#: of the harness does not have is skipped: the figures before the change had two
#: interpreter starts, import_problems and read_fingerprint).
STEPS = ("find_interpreter", "_uv", "import_problems", "read_fingerprint",
         "check_environment")
FIRST_USE = "import importlib, sys\nfor name in sys.argv[1:]: importlib.import_module(name)"
BARE, FIRST, HARNESS, CHECKED = ("bare uv venv + pip install", "bare uv + first import",
                                 "harness: cells can start", "harness: checked")
BARE_CASE, HARNESS_CASE = "bare uv + pytest of the case", "harness realize + the cell"
CASES = ROOT / "cases"


def bare_uv(spec: EnvSpec, venv: Path, env: dict[str, str]) -> tuple[float, float]:
    """Seconds for (a), and for the first import after it."""
    start = time.perf_counter()
    python = bare_install(spec, venv, env, pytest=False)  # the pins alone, as (a) is defined
    built = time.perf_counter()
    # The module a distribution installs is, for these pins, its name.
    modules = [requirement_name(r).replace("-", "_") for r in spec.requirements]
    _run([python, "-c", FIRST_USE, *modules],
         {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"})
    return built - start, time.perf_counter() - built


def bare_install(spec: EnvSpec, venv: Path, env: dict[str, str], *, pytest: bool = True
                 ) -> str:
    """``uv venv`` and ``uv pip install`` of the pins (and pytest); the venv's interpreter."""
    python = str(venv / "bin" / "python")
    extra = [uv_backend.PYTEST_REQUIREMENT] if pytest else []
    for argv in (["venv", "--quiet", "--python", spec.python, str(venv)],
                 ["pip", "install", "--quiet", "--python", python,
                  *uv_backend.index_args(spec.index_urls), *spec.requirements, *extra]):
        _run(["uv", *argv], env)
    return python


def bare_case(spec: EnvSpec, venv: Path, env: dict[str, str], nodeid: str) -> float:
    """Seconds for (d): the bare environment, then pytest of ``nodeid`` in it, as a user who
    has the case file would run it: the case plugin on PYTHONPATH, no other plugin, the
    environment's variables, its bytecode kept in the venv (as the harness keeps it), not
    beside the cases."""
    start = time.perf_counter()
    python = bare_install(spec, venv, env)
    variables = {**{k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"},
                 **dict(spec.env_vars), "PYTHONPATH": str(INENV_DIR),
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                 "PYTHONPYCACHEPREFIX": str(venv / ".pycache")}
    # Exit 1: the case reproduced its failure (the harness calls that REPRODUCED).
    _run([python, "-m", "pytest", "-q", *pytest_args(CASES), nodeid], variables, cwd=CASES,
         ok=(0, 1))
    return time.perf_counter() - start


def harness_case(cell: Cell, cache: Path) -> float:
    """Seconds for (e): the harness realizes the environment and runs the cell in it."""
    backend = uv_backend.UvBackend(cache)
    uv_backend.find_interpreter.cache_clear()
    start = time.perf_counter()
    (run,) = iter_batch([cell], backend, None, cases_dir=CASES)
    took = time.perf_counter() - start
    assert run.env_built, "the harness found an environment instead of building one"
    if run.result.outcome.value not in ("PASS", "REPRODUCED", "SKIP"):
        sys.exit(f"the cell ended {run.result.outcome.value}: {run.result.reason}")
    return took


def _run(argv: list[str], env: dict[str, str], cwd: Path | None = None,
         ok: tuple[int, ...] = (0,)) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, cwd=cwd)
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")


def harness_realize(spec: EnvSpec, cache: Path, steps: dict[str, list[float]]
                    ) -> tuple[float, float]:
    """Seconds until cells can start in the new environment (c), and until its check has
    ended (c')."""
    backend = uv_backend.UvBackend(cache)
    uv_backend.find_interpreter.cache_clear()  # as a fresh harness process finds it
    start = time.perf_counter()
    with timed_steps(steps):
        realizing = backend.begin(spec)
        handed = time.perf_counter() - start
        env = realizing.checked.result() if realizing.checked else realizing.env
        checked = time.perf_counter() - start
    assert env.built, "the harness found an environment instead of building one"
    return handed, checked


@contextlib.contextmanager
def timed_steps(steps: dict[str, list[float]]) -> Iterator[None]:
    """Wrap the functions the build calls; each call's seconds go under its label."""
    saved = {name: getattr(uv_backend, name) for name in STEPS if hasattr(uv_backend, name)}
    for name, function in saved.items():
        setattr(uv_backend, name, _timed(name, function, steps))
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(uv_backend, name, function)


def _timed(name: str, function: Callable[..., Any], steps: dict[str, list[float]]
           ) -> Callable[..., Any]:
    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Any:
        label = name
        if name == "_uv":  # "uv venv", "uv pip install", ...
            label = "uv " + " ".join(a for a in args[0][:2] if not a.startswith("-"))
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            steps[label].append(time.perf_counter() - start)

    return timed


def measure(spec: EnvSpec, cell: Cell, work: Path, repeat: int
            ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    env = uv_backend.uv_environ()  # uv as the harness runs it: native TLS, no downloads
    bare_install(spec, work / "warm", env)  # warms uv's cache for all, pytest too; not timed
    figures: dict[str, list[float]] = {BARE: [], FIRST: [], HARNESS: [], CHECKED: [],
                                       BARE_CASE: [], HARNESS_CASE: []}
    steps: dict[str, list[float]] = defaultdict(list)
    pairs = [["bare", "harness"], ["bare case", "harness case"]]
    for i in range(repeat):
        # Which of a pair goes first alternates every repeat; which pair, every second one.
        ordered = pairs if (i // 2) % 2 == 0 else pairs[::-1]
        for which in (w for pair in ordered for w in (pair if i % 2 == 0 else pair[::-1])):
            if which == "bare":
                built, first = bare_uv(spec, work / f"bare-{i}", env)
                figures[BARE].append(built)
                figures[FIRST].append(built + first)
            elif which == "harness":
                handed, checked = harness_realize(spec, work / f"cache-{i}", steps)
                figures[HARNESS].append(handed)
                figures[CHECKED].append(checked)
            elif which == "bare case":
                figures[BARE_CASE].append(
                    bare_case(spec, work / f"bare-case-{i}", env, cell.case.nodeid))
            else:
                figures[HARNESS_CASE].append(harness_case(cell, work / f"cache-case-{i}"))
    return figures, steps


def find_cell(matrix: Path, env_name: str, case: str) -> Cell:
    """The planned cell of ``case`` (a node id under cases/) in the environment ``env_name``."""
    spec = load_matrix(matrix)
    plan = make_plan(spec, collect_cases(CASES), ["cpu"])
    found = [c for c in plan.cells if c.env.name == env_name and c.case.nodeid == case]
    if not found:
        sys.exit(f"{matrix}: no cell of {case!r} in {env_name!r} on cpu")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("-m", "--matrix", type=Path, default=ROOT / "matrix.yaml")
    parser.add_argument("--env", default="cpu:torch=2.5.1,numpy>=2")
    parser.add_argument("--case", default="test_probes.py::test_numpy_bridge",
                        help="the case (a node id under cases/) run end to end in (d), (e)")
    args = parser.parse_args()
    found = [e for e in load_matrix(args.matrix).environments if e.name == args.env]
    if not found or found[0].backend != "uv":
        sys.exit(f"{args.matrix}: no uv environment named {args.env!r}")
    cell = find_cell(args.matrix, args.env, args.case)
    spec = cell.env  # every timing of the same environment, the cell's
    os.environ.update(uv_backend.uv_environ())
    version = subprocess.run(["uv", "--version"], capture_output=True, text=True).stdout
    print(f"{spec.name}: {' '.join(spec.requirements)}, Python {spec.python}; "
          f"{version.strip()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="env-vs-uv-") as tmp:
        figures, steps = measure(spec, cell, Path(tmp), args.repeat)
    median = {name: statistics.median(times) for name, times in figures.items()}
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")
    width = max(12, 5 * args.repeat - 2)
    print(f"| {'what':28} | median s | {'each run (s)':{width}} | ours / it |")
    print(f"|{'-' * 30}|---------:|{'-' * (width + 2)}|---------:|")
    for name, times in figures.items():
        each = ", ".join(f"{t:.1f}" for t in times)
        # Each bare figure against the harness's of the same extent: c / a, c' / b, e / d.
        ours = {BARE: HARNESS, FIRST: CHECKED, BARE_CASE: HARNESS_CASE}.get(name, name)
        ratio = median[ours] / median[name]
        print(f"| {name:28} | {median[name]:8.1f} | {each:{width}} | {ratio:7.2f}x |")
    print(f"\nthe harness's realization, step by step (median of {args.repeat}):\n")
    print(f"| {'step':28} | median s |")
    print(f"|{'-' * 30}|---------:|")
    accounted = 0.0
    for label, times in steps.items():
        calls = len(times) // args.repeat
        per_build = [sum(times[i * calls:(i + 1) * calls]) for i in range(args.repeat)]
        accounted += statistics.median(per_build)
        shown = f"{label} (x{calls})" if calls > 1 else label
        print(f"| {shown:28} | {statistics.median(per_build):8.2f} |")
    print(f"| {'everything else':28} | {median[CHECKED] - accounted:8.2f} |")


if __name__ == "__main__":
    main()

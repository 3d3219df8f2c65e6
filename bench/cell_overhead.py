"""What one cell costs beyond its case: the harness against bare pytest, same cells, same env.

Prints seconds per cell for
  (a) ``harness run -j 1`` on the cells,
  (b) one bare pytest process running all their node ids,
  (c) one bare pytest process per node id,
and the ratio a/b (the issue's goal: within 1.2).

    python bench/cell_overhead.py [--env 'mergekit:torch=2.0.1'] [--repeat 2]

The environment is realized first (not timed); every figure is the best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.core.paths import INENV_DIR, default_cache_dir
from harness.envs import get_backend
from harness.matrix.load import load_matrix
from harness.plan.cases import collect_cases, pytest_args
from harness.plan.cells import make_plan
from harness.run.watch import CELL_ENV


def bare(python: str, cases_dir: Path, nodeids: list[str]) -> None:
    env = {**os.environ, **CELL_ENV, "PYTHONPATH": str(INENV_DIR), "CUDA_VISIBLE_DEVICES": ""}
    subprocess.run([python, "-m", "pytest", "-q", "-rN", "-p", "no:cacheprovider",
                    *pytest_args(cases_dir), *nodeids], cwd=cases_dir, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def best(repeat: int, run: object) -> float:
    times = []
    for _ in range(repeat):
        start = time.monotonic()
        run()  # type: ignore[operator]
        times.append(time.monotonic() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--matrix", type=Path, default=Path("matrix.yaml"))
    parser.add_argument("--env", default="mergekit:torch=2.0.1")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    spec = load_matrix(args.matrix)
    cases_dir = spec.cases_dir.resolve()
    cells = [c for c in make_plan(spec, collect_cases(cases_dir), ("cpu",)).cells
             if c.env.name == args.env and c.hardware == "cpu"]
    env_spec = cells[0].env
    env = get_backend(env_spec.backend, default_cache_dir()).realize(env_spec)
    nodeids = [c.case.nodeid for c in cells]
    n = len(nodeids)

    def harness() -> None:
        with tempfile.TemporaryDirectory() as reports:
            subprocess.run([sys.executable, "-m", "harness", "--reports", reports, "run", "-m",
                            str(args.matrix), "--only", f"env={args.env}", "--hardware", "cpu",
                            "-j", "1", "--no-report"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)

    a = best(args.repeat, harness)
    b = best(args.repeat, lambda: bare(env.python, cases_dir, nodeids))
    c = best(args.repeat, lambda: [bare(env.python, cases_dir, [x]) for x in nodeids])
    print(f"{n} cpu cells of {args.env} ({env_spec.backend}), best of {args.repeat}:")
    print(f"(a) harness run -j 1:            {a / n:.2f} s/cell  ({a:.1f} s)")
    print(f"(b) one pytest, all node ids:    {b / n:.2f} s/cell  ({b:.1f} s)")
    print(f"(c) one pytest per node id:      {c / n:.2f} s/cell  ({c:.1f} s)")
    print(f"a/b = {a / b:.2f} (goal <= 1.2); a/c = {a / c:.2f}")


if __name__ == "__main__":
    main()

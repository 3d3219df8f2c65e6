"""Re-run an unchanged matrix slice and print what it cost.

Prints the number of environments rebuilt on the second run (must be 0) and the seconds from
start to the first case, for the first (cold or warm cache) and the second run.

    python bench/rerun.py [--only torch=2.0.1 --only torch=2.15.0 ...]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from harness.workflow import (
    RunOptions,
    RunState,
    load_spec,
    open_executor,
    open_store,
    plan_cells,
    run_cells,
)


def once(options: RunOptions) -> tuple[int, int, float | None, float]:
    start = time.monotonic()
    state = RunState(options=options)
    try:
        for step in (load_spec, open_executor, plan_cells, open_store, run_cells):
            result = step(state)
            assert not isinstance(result, int)
            state = result
    finally:
        if state.executor is not None:
            state.executor.shutdown()
    stats = state.stats
    assert stats is not None
    first = stats.first_result_at - start if stats.first_result_at else None
    return len(stats.envs_built), len(stats.envs_reused), first, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--matrix", type=Path, default=Path("matrix.yaml"))
    parser.add_argument("--only", action="append",
                        default=["torch=2.0.1", "torch=2.15.0", "numpy=<2"])
    parser.add_argument("-k", default="mergekit_fp16::repro")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as reports:
        options = replace(RunOptions(), matrix=args.matrix, reports_dir=Path(reports),
                          only=tuple(args.only), keyword=args.k, report=False, live=False,
                          jobs=2)
        for label in ("first run", "re-run (unchanged matrix)"):
            built, reused, first, total = once(options)
            print(f"{label}: environments rebuilt={built} reused={reused} "
                  f"seconds to first result={first:.2f} total={total:.1f}s")


if __name__ == "__main__":
    main()

"""``harness run``: check what can be checked before the run, then run the step chain."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.errors import UsageError
from harness.plan.shard import parse_shard
from harness.planning import run_options
from harness.records.expect import load_baseline, resolve_baseline
from harness.records.store import RunStore, check_run_id
from harness.workflow import RunState, execute


def cmd_run(args: argparse.Namespace) -> int:
    if args.baseline:  # a bad baseline is said now, not after the whole run
        args.baseline = str(resolve_baseline(args.baseline, args.reports, args.matrix))
        load_baseline(Path(args.baseline), args.reports)
    if args.address and args.executor != "ray":
        raise UsageError("--address names a Ray cluster: add --executor ray")
    if args.resume and args.run_id:
        raise UsageError("--resume continues a run; --run-id names a new one: give one")
    wanted = parse_shard(args.shard) if args.shard else None
    if args.resume and wanted:  # another shard's cells: none of them the run's
        shard = RunStore.open(args.reports, args.resume).meta.get("shard")
        if shard is None or parse_shard(shard) != wanted:
            raise UsageError(f"--resume {args.resume} ran "
                             + (f"shard {shard} of its plan" if shard else "its whole plan")
                             + f", not --shard {args.shard}: resume it without --shard")
    if args.run_id is not None:
        check_run_id(args.run_id)
    return execute(RunState(options=run_options(args)))

"""The run options a command's arguments give."""

from __future__ import annotations

import argparse

from harness.core.defaults import DEFAULT_FAIL_ON, RETRIES
from harness.matrix.overrides import parse_sets
from harness.planning import RunOptions


def run_options(args: argparse.Namespace) -> RunOptions:
    """``RunOptions`` from any command that plans (plan, run, cases): what it lacks, the
    default."""
    return RunOptions(matrix=args.matrix, reports_dir=args.reports, only=tuple(args.only),
                      keyword=args.keyword, hardware=tuple(args.hardware), gpus=args.gpus,
                      max_cells=getattr(args, "max_cells", None),
                      jobs=getattr(args, "jobs", 1), resume=getattr(args, "resume", None),
                      run_id=getattr(args, "run_id", None),
                      report=not getattr(args, "no_report", False),
                      find_links=tuple(args.find_links), offline=args.offline,
                      refresh=getattr(args, "refresh", False),
                      executor=getattr(args, "executor", "local"),
                      address=getattr(args, "address", None),
                      retries=getattr(args, "retries", RETRIES),
                      shard=getattr(args, "shard", None),
                      durations_from=getattr(args, "durations_from", None),
                      batch=not getattr(args, "isolate_cells", False),
                      verbose=getattr(args, "verbose", False),
                      fail_on=getattr(args, "fail_on", None) or DEFAULT_FAIL_ON,
                      baseline=getattr(args, "baseline", None),
                      sets=parse_sets(getattr(args, "sets", [])))

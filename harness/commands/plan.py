"""Commands that end before any cell runs: plan, lock, cases, doctor."""

from __future__ import annotations

import argparse
import json
import sys

from harness.core.words import plural
from harness.matrix.load import load_matrix
from harness.matrix.releases import Releases
from harness.plan import collected
from harness.plan.cells import json_lines
from harness.plan.hardware import describe, probe_machine
from harness.plan.shard import fit_shards, shard_jobs
from harness.planning import (
    RunOptions,
    RunState,
    load_spec,
    plan_cells,
    probe_targets,
    run_options,
    shard_durations,
)


def cmd_plan(args: argparse.Namespace) -> int:
    options = run_options(args)
    state = plan_cells(probe_targets(load_spec(RunState(options=options))))
    assert state.plan is not None and state.spec is not None
    if args.format in ("gha", "shards"):
        count, note = fit_shards(state.plan, args.shards)
        if note:
            print(f"harness: {note}", file=sys.stderr)
        jobs = shard_jobs(state.plan, count, shard_durations(options), state.spec.runner_for)
        print(json.dumps({"include": jobs} if args.format == "gha" else jobs,
                         separators=(",", ":") if args.format == "gha" else None,
                         indent=None if args.format == "gha" else 1))
        return 0
    if args.format == "json":
        # A JSON list, one cell a line: quick to write (no indent=), easy to read and diff.
        sys.stdout.write("[\n" + ",\n".join(json_lines(state.plan.cells)) + "\n]\n")
        return 0
    # Plain columns, not rich's table: they pipe into grep and head, and show [brackets] as is.
    rows = [(c.cell_id, c.env.name, c.case.label, c.hardware, c.env.backend)
            for c in state.plan.cells]
    header = ("cell", "environment", "case", "hardware", "backend")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    sys.stdout.write("\n".join(lines) + "\n")
    print(f"{plural(len(rows), 'cell')} in {plural(len(state.plan.environments), 'environment')}")
    for cell in state.plan.cells:  # a suite's tests are known where a session collected them
        suite = cell.case.suite
        if suite is not None:
            found = collected.load(cell.env, suite, cell.hardware, cache_dir=options.cache_dir)
            print(f"suite {suite.name} in {cell.env.name} @{cell.hardware}: " + (
                found.line() if found is not None else
                "tests not known yet (collected when it runs there: a first run, or the "
                "suite's files or the environment changed since)"))
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    """Ask the index for every release query of the matrix; write the lock; say what moved."""
    releases = Releases.for_run(args.matrix, tuple(args.find_links), args.offline, "refresh")
    spec = load_matrix(args.matrix, releases=releases)
    if not spec.resolutions:  # nothing was asked: no lock to write, no "since" to speak of
        print(f"{args.matrix} has no release query (an axis like torch: {{releases: '>=2.0'}});"
              " nothing to lock")
        return 0
    changes = releases.changes()
    written = releases.save(prune=True)
    for resolution in spec.resolutions:
        print("\n".join(resolution.lines()))
    print("\n".join(changes) if changes else "no release came or went since the lock")
    print(f"{'wrote' if written else 'unchanged:'} {releases.path}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    print(describe(probe_machine()))
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    for case in load_spec(RunState(options=RunOptions(matrix=args.matrix))).cases:
        gpu = " [gpu]" if case.needs_gpu else ""
        sigs = f"  reproduces: {', '.join(case.signatures)}" if case.signatures else ""
        print(f"{case.label}{gpu}{sigs}")
    return 0

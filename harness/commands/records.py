"""Commands over run records: report, merge, baseline, history."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.commands import naming
from harness.core.errors import UsageError
from harness.core.results import CellResult
from harness.publish import publish_ci, publish_report, write_status
from harness.records import history, table
from harness.records.compare import choose_records
from harness.records.expect import (
    Baseline,
    baseline_from,
    judged_exit,
    judged_lines,
    load_baseline,
    resolve_baseline,
)
from harness.records.merge import merge_runs
from harness.records.store import RunStore, open_runs
from harness.report.build import write_report
from harness.report.check import check_run


def cmd_report(args: argparse.Namespace) -> int:
    stores = open_runs(args.reports, args.run_id, "report")
    previous = RunStore.open(args.reports, args.diff) if args.diff else None
    baseline = _baseline(args, stores[0])
    if args.out is not None:  # refused before the report is read
        with naming("--out", args.out):
            args.out.mkdir(parents=True, exist_ok=True)
    if args.out is None and len(stores) == 1:
        paths = publish_report(stores[0], args.reports, baseline=baseline, previous=previous)
    else:
        paths = write_report(stores, args.out or args.reports / "combined", baseline=baseline,
                             previous=previous)
    sys.stdout.write(paths["summary"].read_text(encoding="utf-8"))
    print(f"site: {paths['index.html']}")
    if args.status:
        if len(stores) != 1:
            raise UsageError("--status describes one run; give one run id")
        with naming("--status", args.status):
            badge = write_status(stores[0], args.reports, args.status)
        print(f"status: {args.status} ({badge['message']})")
    if args.check:
        problems = check_run(stores, paths["md"].parent, previous)
        for problem in problems:
            print(f"contradiction: {problem}")
        print(f"consistency check: {len(problems)} contradictions between the report and "
              "its record" if problems else "consistency check: every claim of the report (its "
              "verdicts, tables, grid, counts, what changed) follows from the record")
        if problems:
            return 1
    if args.fail_on:
        return judged_exit(stores, args.reports, args.fail_on, args.baseline)
    return 0


def _baseline(args: argparse.Namespace, store: RunStore) -> Baseline | None:
    """``--baseline`` resolved (``latest``: the newest nightly of the run's matrix) and read."""
    if not args.baseline:
        return None
    args.baseline = str(resolve_baseline(args.baseline, args.reports, store.meta.get("matrix"),
                                         store.run_dir))
    return load_baseline(Path(args.baseline), args.reports)


def cmd_merge(args: argparse.Namespace) -> int:
    sources = open_runs(args.reports, args.runs, "merge")
    # Read before the merge, which may replace the run it names (merged again under the same
    # name): the verdicts and the report both judge against the run as it was.
    baseline = _baseline(args, sources[0])
    merged = merge_runs(sources, args.reports, run_id=args.run_id,
                        warn=lambda m: print(f"harness: warning: {m}", file=sys.stderr))
    store = merged.store
    print(f"merged {len(sources)} runs into {store.run_id}: {merged.cells} cells, "
          f"{merged.missing} MISSING -> {store.run_dir}")
    # The verdicts read the lines as decoded, not as their shards wrote them.
    lines, code = judged_lines([store], args.fail_on, baseline, merged.written)
    if lines:
        print("\n".join(lines))
    del merged  # the merge's results let go before the report reads the run (peak memory)
    if args.no_report:
        return code
    paths = publish_report(store, args.reports, baseline=baseline)
    print(f"report: {paths['index.html']} (also compat.md, .csv, .json, junit.xml)")
    publish_ci(store, args.reports)
    return code


def cmd_baseline(args: argparse.Namespace) -> int:
    stores = open_runs(args.reports, args.runs, "baseline")
    # One run: its table; several: each cell's record chosen as a merge would.
    results: Sequence[CellResult] = (
        table.read(stores[0].run_dir).rows() if len(stores) == 1
        else [r for _, r in choose_records(stores)[0].values()])
    data = baseline_from(results, ", ".join(s.run_id for s in stores))
    text = json.dumps(data, indent=1) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    with naming("-o", args.output):
        args.output.write_text(text, encoding="utf-8")
    print(f"baseline: {len(data['cells'])} cells from {data['source']} -> {args.output}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    folder = args.dir or args.reports / "runs"
    if args.action == "prune":
        for removed in history.prune(folder, keep=args.last):
            print(f"removed {removed}")
        return 0
    found = history.load(folder, last=args.last, keyword=args.keyword)
    if args.format == "json":
        data = found.to_dict(changed_only=not args.all)
        # One cell a line through json's C encoder (indent= runs the pure-Python one).
        head = json.dumps({k: v for k, v in data.items() if k != "cells"})[:-1]
        sys.stdout.write(head + ', "cells": [\n' + ",\n".join(
            json.dumps(c) for c in data["cells"]) + "\n]}\n")
    else:
        print(found.render(changed_only=not args.all))
    return 0

"""The command line: parse, call the pipeline, exit. Usage errors are one line and exit 2."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import __version__
from harness.core.bulk import no_cycle_collection
from harness.core.errors import HarnessError, UsageError

if TYPE_CHECKING:
    from harness.workflow import RunOptions


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--matrix", type=Path, default=Path("matrix.yaml"),
                   help="the matrix file (default: matrix.yaml)")
    p.add_argument("--only", action="append", default=[], metavar="AXIS=VALUE",
                   help="keep cells whose environment has AXIS=VALUE (repeatable)")
    p.add_argument("-k", dest="keyword", help="keep case variants matching this glob/substring")
    p.add_argument("--hardware", action="append", default=[],
                   help="keep cells on this target: cpu, sm_90, ... (repeatable)")
    p.add_argument("--gpus", help="GPU slots: 0,1 or 0:sm_90,1:sm_90 (default: probe)")
    p.add_argument("--max-cells", type=int, metavar="N",
                   help="refuse a matrix that expands past N cells (default 100,000; also "
                        "HARNESS_MAX_CELLS)")
    _find_links(p)


def _find_links(p: argparse.ArgumentParser) -> None:
    p.add_argument("--find-links", action="append", default=[], type=Path, metavar="DIR",
                   help="also install from this folder of wheels; a package the matrix names "
                        "by URL is taken from here when a wheel of it is here (repeatable; "
                        "also HARNESS_FIND_LINKS)")
    p.add_argument("--offline", action="store_true",
                   help="install only from --find-links folders, never from an index; a "
                        "missing wheel is that environment's ERROR (also HARNESS_OFFLINE=1)")


def _expectations(p: argparse.ArgumentParser, fail_on: str | None) -> None:
    from harness.records.expect import FAIL_ON

    p.add_argument("--fail-on", choices=FAIL_ON, default=fail_on,
                   help="exit 1 when: new = a cell fails that was not expected to (matrix "
                        "`expect:` rules, --baseline); changed = any cell differs from what "
                        "was expected (a documented failure that stopped reproducing too); "
                        "any = any cell fails" + (f" (default: {fail_on})" if fail_on else ""))
    p.add_argument("--baseline", metavar="FILE|RUN",
                   help="what each cell is expected to be: a file from `harness baseline`, "
                        "or a run (id, folder, latest)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--reports", type=Path, default=Path("reports"),
                        help="where runs and tables go (default: reports)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="expand the matrix into cells and print them")
    _common(p)
    p.add_argument("--format", choices=("table", "json", "gha", "shards"), default="table",
                   help="gha: a GitHub Actions matrix of shard jobs (fromJSON input); shards: "
                        "the same as a plain JSON list, for other CI systems")
    p.add_argument("--shards", type=int, metavar="N",
                   help="gha/shards: how many shards (default: one per environment and "
                        "hardware target; never more than 256)")
    p.add_argument("--durations-from", metavar="RUN",
                   help="balance shards by the cell durations of this run (id or folder)")

    p = sub.add_parser("run", help="build environments, run the cells, write the table")
    _common(p)
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="CPU slots (default: number of cores)")
    p.add_argument("--resume", metavar="RUN_ID", help="run only what RUN_ID ('latest') lacks")
    p.add_argument("--run-id", help="name the run folder (a CI job names its shard)")
    p.add_argument("--no-report", action="store_true",
                   help="skip writing the report (the run's report/ folder)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where cells run: this machine's slots, or a Ray cluster")
    p.add_argument("--address", metavar="auto|HOST:PORT",
                   help="--executor ray: the cluster to join (default: start one here)")
    p.add_argument("--shard", metavar="I/N",
                   help="run only shard I of N (the same split on every machine)")
    p.add_argument("--durations-from", metavar="RUN",
                   help="balance shards by the cell durations of this run (id or folder); "
                        "give every shard the same one")
    p.add_argument("--retries", type=int, default=2, metavar="N",
                   help="times a cell is run again when its machine fails (default: 2)")
    p.add_argument("--isolate-cells", action="store_true",
                   help="a pytest process per cell (default: a case module's cells of one "
                        "environment share one, and a crash restarts at the next cell)")
    p.add_argument("--refresh", action="store_true",
                   help="rebuild every environment once, so '*' and range pins take the "
                        "newest releases (what resolved is in the run record)")
    _expectations(p, "new")

    p = sub.add_parser("report", help="write a run's report site (index, a page per failure, "
                       "grid, every cell; md, csv, json, junit) and print its summary")
    p.add_argument("run_id", nargs="*", default=["latest"],
                   help="run ids or run folders (default: latest); several are merged")
    p.add_argument("--diff", metavar="RUN_ID",
                   help="say what changed since RUN_ID (default: the run before it)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where the report goes (default: the run's own report/ folder; for "
                        "several runs REPORTS/combined)")
    _expectations(p, None)

    p = sub.add_parser("merge", help="merge the run folders of a plan's shards into one run")
    p.add_argument("runs", nargs="+", help="run folders (or run ids under --reports)")
    p.add_argument("--run-id", help="name of the merged run (default: from the inputs)")
    p.add_argument("--no-report", action="store_true",
                   help="skip writing the report (the run's report/ folder)")
    _expectations(p, "new")

    p = sub.add_parser("baseline", help="write what each cell of a run is, as the baseline "
                       "later runs are judged by (--baseline FILE)")
    p.add_argument("runs", nargs="*", default=["latest"],
                   help="run ids or folders (default: latest); several are merged")
    p.add_argument("-o", "--output", type=Path, help="the file (default: print it)")

    p = sub.add_parser("history", help="each cell's outcomes over the last runs; prune old runs")
    p.add_argument("action", nargs="?", choices=("show", "prune"), default="show")
    p.add_argument("--dir", type=Path, help="a folder of run folders (default: REPORTS/runs)")
    p.add_argument("--last", type=int, default=10, metavar="N",
                   help="show: the last N runs (default: 10); prune: keep the newest N")
    p.add_argument("--all", action="store_true",
                   help="show: every cell, not only those whose outcome changed")
    p.add_argument("-k", dest="keyword", help="show: cells whose case or environment matches")
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser("envs", help="list, prune or check (preflight) environments")
    p.add_argument("action", choices=("list", "prune", "check"))
    p.add_argument("-m", "--matrix", type=Path, default=Path("matrix.yaml"))
    p.add_argument("--all", action="store_true", help="prune: remove every environment")
    p.add_argument("--dry-run", action="store_true",
                   help="prune: list what would be removed, remove nothing")
    p.add_argument("--build", action="store_true",
                   help="check: also build each environment here and import what it names")
    p.add_argument("--env", action="append", default=[], metavar="GLOB",
                   help="check: only environments whose name matches (repeatable)")
    p.add_argument("--platform", default=None,
                   help="check: the platform to resolve for (default: x86_64-manylinux_2_28)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("-j", "--jobs", type=int, default=4, help="check: resolves at a time")
    _find_links(p)

    p = sub.add_parser("images", help="docker images: bootstrap a local base image")
    p.add_argument("action", choices=("bootstrap",))
    p.add_argument("--tag", default=None, help="image to create (default: the harness base)")
    p.add_argument("--suite", default="bookworm", help="Debian suite for debootstrap")
    p.add_argument("--mirror", default="http://deb.debian.org/debian", help="Debian mirror")
    p.add_argument("--force", action="store_true", help="rebuild even if the image exists")

    p = sub.add_parser("wheelhouse", help="download every wheel the environments need into a "
                       "folder, for runs with --offline --find-links DIR")
    p.add_argument("folder", type=Path)
    p.add_argument("-m", "--matrix", type=Path, default=Path("matrix.yaml"))
    p.add_argument("--env", action="append", default=[], metavar="GLOB",
                   help="only environments whose name matches (repeatable)")
    p.add_argument("--platform", default=None,
                   help="the target platform (default: x86_64-manylinux_2_28)")
    p.add_argument("--python", dest="target_python", metavar="X.Y",
                   help="overlays: the Python of their base on the target machine")
    p.add_argument("--base-packages", type=Path, metavar="FILE",
                   help="overlays: what their base holds on the target machine (name==version "
                        "lines, as `pip list --format=freeze` prints them); those stay out of "
                        "the folder")
    _find_links(p)

    sub.add_parser("doctor", help="print this machine's fingerprint")
    p = sub.add_parser("cases", help="list the case variants")
    p.add_argument("-m", "--matrix", type=Path, default=Path("matrix.yaml"))
    return parser


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


#: Commands that read or build a fleet's records at once, then exit (``harness.bulk``).
BATCH = frozenset({"plan", "merge", "report", "history", "baseline"})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # A CI runner cancelling a job sends SIGTERM: clean up (kill cells, remove containers)
    # exactly as for Ctrl-C, instead of dying with children and containers left behind.
    signal.signal(signal.SIGTERM, _interrupt)
    limit = getattr(args, "max_cells", None)
    if limit is not None and limit < 1:
        print("harness: error: --max-cells must be at least 1", file=sys.stderr)
        return 2
    previous = os.environ.get("HARNESS_MAX_CELLS")
    if limit is not None:
        os.environ["HARNESS_MAX_CELLS"] = str(limit)  # read where matrices expand
    try:
        if args.command in BATCH:
            with no_cycle_collection():
                return COMMANDS[args.command](args)
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        # `harness plan | head`: the reader left; say nothing more, as cat does.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("harness: interrupted; finished results are kept (resume with --resume latest)",
              file=sys.stderr)
        return 130
    finally:
        if limit is not None:  # main() may be called in-process (tests, benches)
            if previous is None:
                os.environ.pop("HARNESS_MAX_CELLS", None)
            else:
                os.environ["HARNESS_MAX_CELLS"] = previous


def cmd_plan(args: argparse.Namespace) -> int:
    from harness.workflow import RunState, load_spec, plan_cells, probe_targets

    state = plan_cells(probe_targets(load_spec(RunState(options=_options(args)))))
    assert state.plan is not None and state.spec is not None
    if args.format in ("gha", "shards"):
        return _print_shards(args, state)
    if args.format == "json":
        from harness.plan.cells import json_lines

        # A JSON list, one cell a line (indent= would run the pure Python encoder over
        # 100,000 cells), still one line per cell to read and diff.
        sys.stdout.write("[\n" + ",\n".join(json_lines(state.plan.cells)) + "\n]\n")
        return 0
    cells = [c.to_dict() for c in state.plan.cells]
    # Plain columns: 2,000 rows print in milliseconds (rich's table took 1.5 s), pipe into
    # grep and head cleanly, and show test ids' [brackets] as they are.
    rows = [(c["cell_id"], c["environment"], f"{c['case']}::{c['variant']}", c["hardware"],
             c["backend"]) for c in cells]
    header = ("cell", "environment", "case", "hardware", "backend")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    sys.stdout.write("\n".join(lines) + "\n")
    print(f"{len(cells)} cells in {len(state.plan.environments)} environments")
    return 0


def _print_shards(args: argparse.Namespace, state: Any) -> int:
    from harness.plan.shard import fit_shards, make_shards
    from harness.workflow import shard_durations

    count, note = fit_shards(state.plan, args.shards)
    if note:
        print(f"harness: {note}", file=sys.stderr)
    jobs = []
    for shard in make_shards(state.plan, count, shard_durations(_options(args))):
        if not shard.cells:
            continue
        jobs.append({"shard": shard.label, "hardware": shard.hardware,
                     "runs-on": state.spec.runner_for(shard.hardware),
                     "artifact": f"harness-shard-{shard.index}-of-{shard.count}",
                     "cells": len(shard.cells),
                     "environments": len({c.env.name for c in shard.cells})})
    print(json.dumps({"include": jobs} if args.format == "gha" else jobs,
                     separators=(",", ":") if args.format == "gha" else None,
                     indent=None if args.format == "gha" else 1))
    return 0


def _options(args: argparse.Namespace) -> RunOptions:
    from harness.workflow import RunOptions

    return RunOptions(matrix=args.matrix, reports_dir=args.reports, only=tuple(args.only),
                      keyword=args.keyword, hardware=tuple(args.hardware), gpus=args.gpus,
                      jobs=getattr(args, "jobs", 1), resume=getattr(args, "resume", None),
                      run_id=getattr(args, "run_id", None),
                      report=not getattr(args, "no_report", False),
                      find_links=tuple(args.find_links), offline=args.offline,
                      refresh=getattr(args, "refresh", False),
                      executor=getattr(args, "executor", "local"),
                      address=getattr(args, "address", None),
                      retries=getattr(args, "retries", 2),
                      shard=getattr(args, "shard", None),
                      durations_from=getattr(args, "durations_from", None),
                      batch=not getattr(args, "isolate_cells", False),
                      fail_on=getattr(args, "fail_on", None) or "new",
                      baseline=getattr(args, "baseline", None))


def cmd_run(args: argparse.Namespace) -> int:
    from harness.workflow import RunState, execute

    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.retries < 0:
        raise UsageError("--retries must be 0 or more")
    if args.baseline:  # a bad baseline is said now, not after the whole run
        from harness.records.baseline import load_baseline, resolve_baseline

        args.baseline = str(resolve_baseline(args.baseline, args.reports))
        load_baseline(Path(args.baseline), args.reports)
    if args.address and args.executor != "ray":
        raise UsageError("--address names a Ray cluster: add --executor ray")
    if args.resume and args.run_id:
        raise UsageError("--resume continues a run; --run-id names a new one: give one")
    if args.shard:
        from harness.plan.shard import parse_shard

        parse_shard(args.shard)
    from harness.records.layout import RUN_ID

    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        raise UsageError(f"--run-id {args.run_id!r}: use letters, digits, '.', '_' and '-'")
    return execute(RunState(options=_options(args)))


def cmd_report(args: argparse.Namespace) -> int:
    from harness.records.store import RunStore
    from harness.report.build import write_report

    stores = [RunStore.open(args.reports, run_id) for run_id in args.run_id]
    previous = RunStore.open(args.reports, args.diff) if args.diff else None
    if args.out is None and len(stores) == 1:
        from harness.workflow import publish_report

        paths = publish_report(stores[0], args.reports, baseline=_baseline(args),
                               previous=previous)
    else:
        paths = write_report(stores, args.out or args.reports / "combined",
                             baseline=_baseline(args), previous=previous)
    sys.stdout.write(paths["summary"].read_text(encoding="utf-8"))
    print(f"site: {paths['index.html']}")
    if args.fail_on:
        from harness.workflow import judged_exit

        return judged_exit(stores, args.reports, args.fail_on, args.baseline)
    return 0


def _baseline(args: argparse.Namespace) -> Any:
    from harness.records.baseline import load_baseline

    return load_baseline(Path(args.baseline), args.reports) if args.baseline else None


def cmd_merge(args: argparse.Namespace) -> int:
    from harness.records.merge import merge_runs
    from harness.records.store import RunStore

    sources = [RunStore.open(args.reports, run) for run in args.runs]
    if args.baseline:  # `latest` is the newest run before the merged one
        from harness.records.baseline import resolve_baseline

        args.baseline = str(resolve_baseline(args.baseline, args.reports))
    baseline = _baseline(args)
    report = merge_runs(sources, args.reports, run_id=args.run_id,
                        warn=lambda m: print(f"harness: warning: {m}", file=sys.stderr))
    print(f"merged {len(sources)} runs into {report.store.run_id}: {report.cells} cells, "
          f"{report.missing} MISSING -> {report.store.run_dir}")
    if not args.no_report:
        from harness.workflow import publish_ci, publish_report

        paths = publish_report(report.store, args.reports, baseline=baseline,
                               results=report.results)
        print(f"report: {paths['index.html']} (also compat.md, .csv, .json, junit.xml)")
        publish_ci(report.store, args.reports, report.results)
    from harness.workflow import judged_exit

    return judged_exit([report.store], args.reports, args.fail_on, args.baseline,
                       report.results)


def cmd_baseline(args: argparse.Namespace) -> int:
    from harness.records.baseline import baseline_from
    from harness.records.select import choose_records
    from harness.records.store import RunStore

    stores = [RunStore.open(args.reports, run) for run in args.runs]
    results = [r for _, r in choose_records(stores)[0].values()]
    text = json.dumps(baseline_from(results, ", ".join(s.run_id for s in stores)),
                      indent=1) + "\n"
    if args.output is None:
        sys.stdout.write(text)
        return 0
    args.output.write_text(text, encoding="utf-8")
    data = json.loads(text)
    print(f"baseline: {len(data['cells'])} cells from {data['source']} -> {args.output}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from harness.records import history

    folder = args.dir or args.reports / "runs"
    if args.last < 1:
        raise UsageError("--last must be at least 1")
    if args.action == "prune":
        for removed in history.prune(folder, keep=args.last):
            print(f"removed {removed}")
        return 0
    table = history.load(folder, last=args.last, keyword=args.keyword)
    if args.format == "json":
        data = table.to_dict(changed_only=not args.all)
        # One cell a line through json's C encoder (indent= runs the pure-Python one).
        head = json.dumps({k: v for k, v in data.items() if k != "cells"})[:-1]
        sys.stdout.write(head + ', "cells": [\n' + ",\n".join(
            json.dumps(c) for c in data["cells"]) + "\n]}\n")
    else:
        print(table.render(changed_only=not args.all))
    return 0


def cmd_envs(args: argparse.Namespace) -> int:
    from harness.core.paths import default_cache_dir
    from harness.envs import BACKENDS
    from harness.matrix.load import load_matrix

    cache = default_cache_dir()
    if args.action == "check":
        return _envs_check(args, cache)
    listing = [e for cls in BACKENDS.values() for e in cls(cache).listing()]
    if args.action == "list":
        for e in listing:
            print(f"{e['backend']:6} {e['key']}  {e['name']}  {e['location']}")
        print(f"{len(listing)} environments under {cache}")
        return 0
    backends = {name: cls(cache) for name, cls in BACKENDS.items()}
    keep = set() if args.all else {
        (env.backend, backends[env.backend].listing_key(env))
        for env in load_matrix(args.matrix).environments if env.backend in backends}
    removed = [e for e in listing if (e["backend"], e["key"]) not in keep]
    verb = "would remove" if args.dry_run else "removed"
    for e in removed:
        if not args.dry_run:
            backends[e["backend"]].remove_location(e["location"])
        print(f"{verb} {e['name']} ({e['location']})")
    if args.all:  # wheels built per build environment, and the preflight's scratch venvs
        for extra in (cache / "uv-build-cache", cache / "preflight"):
            if extra.exists():
                if not args.dry_run:
                    shutil.rmtree(extra, ignore_errors=True)
                print(f"{verb} {extra}")
    print(f"{verb} {len(removed)}, kept {len(listing) - len(removed)}")
    return 0


def _envs_check(args: argparse.Namespace, cache: Path) -> int:
    from harness.envs import get_backend
    from harness.envs.preflight import DEFAULT_PLATFORM, check_environments, render_table, summary

    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    envs = _selected_envs(args)
    backends = {name: get_backend(name, cache) for name in {e.backend for e in envs}}

    def progress(check: Any) -> None:
        if args.format == "table":
            print(f"{check.name}: resolves {check.resolves}, builds {check.builds}, "
                  f"imports {check.imports}", file=sys.stderr, flush=True)

    checks = check_environments(envs, backends=backends, cache_dir=cache, build=args.build,
                                platform=args.platform or DEFAULT_PLATFORM, jobs=args.jobs,
                                on_done=progress)
    if args.format == "json":
        print(json.dumps([c.to_dict() for c in checks], indent=1))
    else:
        print(render_table(checks))
        print(summary(checks))
    return 0 if all(c.ok for c in checks) else 1


def _selected_envs(args: argparse.Namespace) -> list[Any]:
    """The matrix's environments (sources applied), filtered by ``--env`` globs."""
    from fnmatch import fnmatchcase

    from harness.matrix.load import load_matrix
    from harness.matrix.sources import (
        find_links_folders,
        offline_from_environment,
        with_find_links,
    )

    spec = with_find_links(load_matrix(args.matrix), find_links_folders(tuple(args.find_links)),
                           offline=offline_from_environment(args.offline))
    envs = [e for e in spec.environments
            if not args.env or any(fnmatchcase(e.name, g) for g in args.env)]
    if not envs:
        raise UsageError("--env: no environment matches " + ", ".join(args.env))
    return envs


def cmd_wheelhouse(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from harness.core.paths import default_cache_dir
    from harness.envs.overlay import read_packages
    from harness.envs.preflight import DEFAULT_PLATFORM
    from harness.envs.wheelhouse import build_wheelhouse, summary

    envs = [e for e in _selected_envs(args) if e.backend == "uv"]
    base = read_packages(args.base_packages) if args.base_packages else None
    if args.target_python:
        envs = [replace(e, python=args.target_python) if e.base else e for e in envs]

    def progress(report: Any) -> None:
        state = report.error or (f"{len(report.wheels)} wheels"
                                 + (f", {len(report.missing)} missing" if report.missing else ""))
        print(f"{report.name}: {state}", flush=True)
        for pin, why in report.missing.items():
            print(f"  missing {pin}: {why}", flush=True)

    reports = build_wheelhouse(envs, args.folder, cache_dir=default_cache_dir(),
                               platform=args.platform or DEFAULT_PLATFORM, base_packages=base,
                               on_done=progress)
    print(summary(reports, args.folder))
    return 1 if any(r.error or r.missing for r in reports) else 0


def cmd_images(args: argparse.Namespace) -> int:
    from harness.envs.docker import connect
    from harness.envs.images import LOCAL_BASE, bootstrap_base

    print(bootstrap_base(connect(), tag=args.tag or LOCAL_BASE, suite=args.suite,
                         mirror=args.mirror, force=args.force))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from harness.plan.hardware import describe, probe_machine

    print(describe(probe_machine()))
    return 0


def cmd_cases(args: argparse.Namespace) -> int:
    from harness.workflow import RunOptions, RunState, load_spec

    for case in load_spec(RunState(options=RunOptions(matrix=args.matrix))).cases:
        gpu = " [gpu]" if case.needs_gpu else ""
        sigs = f"  reproduces: {', '.join(case.signatures)}" if case.signatures else ""
        print(f"{case.label}{gpu}{sigs}")
    return 0


COMMANDS = {"plan": cmd_plan, "run": cmd_run, "report": cmd_report, "merge": cmd_merge,
            "baseline": cmd_baseline, "history": cmd_history,
            "envs": cmd_envs,
            "wheelhouse": cmd_wheelhouse, "images": cmd_images, "doctor": cmd_doctor,
            "cases": cmd_cases}

if __name__ == "__main__":
    raise SystemExit(main())

"""The command line: parse, call the pipeline, exit. Usage errors are one line and exit 2."""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from harness import __version__
from harness.core.defaults import DEFAULT_FAIL_ON, FAIL_ON, RETRIES
from harness.core.errors import HarnessError, UsageError, one_line


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, as every other error."""

    def error(self, message: str) -> NoReturn:
        if message == "the following arguments are required: command":
            message = f"give a command: {', '.join(COMMANDS)}"
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} "
                     f"(see {self.prog} --help)\n")


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
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="replace an axis's values with this one, or add it where the matrix "
                        "names the key nowhere (torch=2.6.0; several: te=2.8.0,flash_attn=*)")
    _find_links(p)


def _find_links(p: argparse.ArgumentParser) -> None:
    p.add_argument("--find-links", action="append", default=[], metavar="DIR|URL",
                   help="also install from this folder of wheels (or one served over http(s)); "
                        "a package the matrix names by URL is taken from here when a wheel of "
                        "it is here (repeatable; also HARNESS_FIND_LINKS)")
    p.add_argument("--offline", action="store_true",
                   help="install only from --find-links folders, never from an index; a "
                        "missing wheel is that environment's ERROR (also HARNESS_OFFLINE=1)")


def _registry(p: argparse.ArgumentParser) -> None:
    p.add_argument("--registry", metavar="HOST[:PORT]/NAME",
                   help="docker environments: pull each image from this registry, or build it "
                        "and push it there (tagged by its content key; also HARNESS_REGISTRY)")


def _expectations(p: argparse.ArgumentParser, fail_on: str | None) -> None:
    p.add_argument("--fail-on", choices=FAIL_ON, default=fail_on,
                   help="exit 1 when: new = a cell fails that was not expected to (matrix "
                        "`expect:` rules, --baseline); changed = any cell differs from what "
                        "was expected (a documented failure that stopped reproducing too); "
                        "any = any cell fails" + (f" (default: {fail_on})" if fail_on else ""))
    p.add_argument("--baseline", metavar="FILE|RUN",
                   help="what each cell is expected to be: a file from `harness baseline`, "
                        "or a run (id, folder, latest)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness", description=__doc__)
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
    p.add_argument("--refresh", action="store_true",
                   help="ask the index again for the matrix's release queries (and rewrite "
                        "the lock)")

    p = sub.add_parser("lock", help="resolve the matrix's release queries against the index "
                       "and write them to the lock beside it (matrix.lock.json)")
    p.add_argument("-m", "--matrix", type=Path, default=Path("matrix.yaml"))
    _find_links(p)

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
    p.add_argument("--retries", type=int, default=RETRIES, metavar="N",
                   help=f"times a cell is run again when its machine fails (default: {RETRIES})")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print every cell not run here (default: a line per environment "
                        "and hardware target, with the count)")
    p.add_argument("--isolate-cells", action="store_true",
                   help="a pytest process per cell (default: a case module's cells of one "
                        "environment share one, and a crash restarts at the next cell)")
    p.add_argument("--refresh", action="store_true",
                   help="ask the index again for the matrix's release queries, and rebuild "
                        "every environment once, so '*' and range pins take the newest "
                        "releases (what resolved is in the run record)")
    _registry(p)
    _expectations(p, DEFAULT_FAIL_ON)

    p = sub.add_parser("bisect", help="the first release of an axis where one cell's "
                       "outcome changes: builds and runs only the releases binary search needs")
    _common(p)
    p.add_argument("--axis", help="the axis to bisect (torch, te, ...)")
    p.add_argument("--between", nargs=2, metavar=("GOOD_RUN", "BAD_RUN"),
                   help="instead of an axis: the smallest set of the package changes between "
                        "two runs' environments of the cell that flips it (delta debugging)")
    p.add_argument("--good", metavar="VERSION",
                   help="a release with the one outcome (with --bad; default: found in the "
                        "newest run that has the cell)")
    p.add_argument("--bad", metavar="VERSION", help="a release with the other outcome")
    p.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                   help="CPU slots for each probe's run")

    p = sub.add_parser("report", help="write a run's report site (index, a page per failure, "
                       "grid, every cell; md, csv, json, junit) and print its summary")
    p.add_argument("run_id", nargs="*", default=["latest"],
                   help="run ids or run folders (default: latest); several are merged")
    p.add_argument("--diff", metavar="RUN_ID",
                   help="say what changed since RUN_ID (default: the run before it)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where the report goes (default: the run's own report/ folder; for "
                        "several runs REPORTS/combined)")
    p.add_argument("--check", action="store_true",
                   help="then check that every claim of the report (counts, tables, verdicts, "
                        "the grid, what changed) follows from the record; exit 1 if not")
    p.add_argument("--status", type=Path, metavar="FILE",
                   help="also write a badge's JSON (shields.io endpoint): cells as documented, "
                        "new failures since the run before")
    _expectations(p, None)

    p = sub.add_parser("merge", help="merge the run folders of a plan's shards into one run")
    p.add_argument("runs", nargs="+", help="run folders (or run ids under --reports)")
    p.add_argument("--run-id", help="name of the merged run (default: from the inputs)")
    p.add_argument("--no-report", action="store_true",
                   help="skip writing the report (the run's report/ folder)")
    _expectations(p, DEFAULT_FAIL_ON)

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

    p = sub.add_parser("envs", help="list, prune, check (preflight) or build the wheels of "
                       "environments")
    p.add_argument("action", choices=("list", "prune", "check", "build"))
    p.add_argument("-m", "--matrix", type=Path, default=Path("matrix.yaml"))
    p.add_argument("--all", action="store_true", help="prune: remove every environment")
    p.add_argument("--dry-run", action="store_true",
                   help="prune: list what would be removed, remove nothing")
    p.add_argument("--build", action="store_true",
                   help="check: also build each environment here and import what it names")
    p.add_argument("--env", action="append", default=[], metavar="GLOB",
                   help="check: only environments whose name matches (repeatable)")
    p.add_argument("--skip-build", action="append", default=[], metavar="DIST",
                   help="check --build: resolve, but do not build, the environments that "
                        "build DIST from source (repeatable; flash-attn takes hours)")
    p.add_argument("--platform", default=None,
                   help="check: the platform to resolve for (default: x86_64-manylinux_2_28)")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="list, check: a table, or JSON")
    p.add_argument("-j", "--jobs", type=int, default=4, help="check: resolves at a time")
    p.add_argument("--into", type=Path, metavar="DIR",
                   help="build: compile what the environments build from source into DIR, "
                        "each wheel under its key, for runs with --find-links DIR; with "
                        "--registry, also build and push the docker environments' images")
    p.add_argument("--arch", action="append", default=[], metavar="SM",
                   help="build: a GPU architecture to compile for (sm_90; repeatable; default: "
                        "each environment's hardware)")
    _registry(p)
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


def reference() -> str:
    """docs/cli.md, read from the parser so that it cannot drift (``nox -s docs`` writes it)."""
    parser = build_parser()
    out = ["# The command line", "",
           "Generated from the parser by `nox -s docs` (`harness.cli.reference`); do not edit.",
           ""]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in commands._choices_actions}
    for name, sub in [("harness", parser), *commands.choices.items()]:
        # A fixed width, not the terminal's: the page is the same wherever it is written.
        sub.formatter_class = functools.partial(argparse.HelpFormatter, width=100)
        out += [f"## {sub.prog}", ""]
        if name in helps:
            out += [f"{helps[name]}.", ""]
        out += ["```text", sub.format_usage().strip(), "```", ""]
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                continue
            names = ", ".join(action.option_strings) or action.dest
            meta = "" if action.nargs == 0 else (
                f" {{{','.join(map(str, action.choices))}}}" if action.choices
                else f" {_metavar(action)}" if action.option_strings else "")
            out.append(f"- `{names}{meta}`" + (f": {' '.join(action.help.split())}"
                                               if action.help else ""))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _metavar(action: argparse.Action) -> str:
    """An option's value as its usage line shows it: a tuple metavar is one word per value."""
    meta = action.metavar or action.dest.upper()
    return " ".join(meta) if isinstance(meta, tuple) else meta


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser, whose --help lists its options
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        misplaced = [a for a in extra if a.split("=")[0] in parser._option_string_actions]
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}" + (
            f"; {misplaced[0]} is an option of harness itself: give it before the command"
            if misplaced else ""))
    # A CI runner cancelling a job sends SIGTERM: clean up exactly as for Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    for name, least in LEAST.items():  # a count out of range: refused before anything runs
        value = getattr(args, name, None)
        if value is not None and value < least:
            print(f"harness: error: --{name.replace('_', '-')} must be "
                  + (f"at least {least}" if least else "0 or more"), file=sys.stderr)
            return 2
    module, _, function = COMMANDS[args.command].partition(":")
    try:
        body: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(f"harness.commands.{module}"), function)
        code = body(args)
        sys.stdout.flush()  # what is left to write fails here, not at exit
        return code
    except BrokenPipeError:
        # `harness plan | head`: the reader left; say nothing more, as cat does.
        _drop_stdout()
        return 141
    except OSError as exc:  # `harness plan > /dev/full`; any other OSError is a bug's
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        _drop_stdout()
        print(f"harness: error: cannot write output: {exc.strerror}", file=sys.stderr)
        return 2
    except HarnessError as exc:  # a user's mistake is one line, whatever it quotes
        said = one_line(str(exc), 4000) if isinstance(exc, UsageError) else exc
        print(f"harness: error: {said}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # only a run keeps results to resume
        print("harness: interrupted" + ("; finished results are kept (resume with --resume "
                                        "latest)" if args.command == "run" else ""),
              file=sys.stderr)
        return 130


def _drop_stdout() -> None:
    """What stdout still holds goes nowhere (not into a second error at exit)."""
    with contextlib.suppress(OSError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


#: The least value of each count option (any command's).
LEAST = {"max_cells": 1, "jobs": 1, "retries": 0, "last": 1}
#: Each command's body, imported when it runs: ``harness --help`` imports no pipeline module.
COMMANDS = {"plan": "plan:cmd_plan", "run": "run:cmd_run", "report": "records:cmd_report",
            "merge": "records:cmd_merge", "baseline": "records:cmd_baseline",
            "history": "records:cmd_history", "envs": "envs:cmd_envs",
            "wheelhouse": "envs:cmd_wheelhouse", "images": "envs:cmd_images",
            "doctor": "plan:cmd_doctor", "cases": "plan:cmd_cases",
            "lock": "plan:cmd_lock", "bisect": "bisect:cmd_bisect"}


if __name__ == "__main__":
    raise SystemExit(main())

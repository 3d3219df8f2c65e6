"""One harness command, an older revision against this checkout, alternated.

This machine's speed drifts from minute to minute (``common.speed_line``), so two figures
taken at different times compare nothing; what compares is old and new started one after the other,
again and again. The older revision is checked out beside this one (``git worktree``) and
both have their bytecode compiled first: where ``PYTHONDONTWRITEBYTECODE`` is set (it is on
the machine these figures come from), a checkout without it compiles every module it
imports at each start, a cost the other side does not pay.

    python bench/alternate.py --old 00d2759 --cwd DATA --env HARNESS_MAX_CELLS=200000 \\
        --repeat 5 -- --reports reports report merged --out /tmp/out

prints each run's wall seconds, both medians (wall and CPU), the peak RSS, and the speed line
before and after. ``DATA`` is where the command runs (a ``bench/scale.py --keep`` folder;
``--old-cwd`` another for the old side, one its own revision wrote); its
``cache`` folder is the harness's cache for both.
"""

from __future__ import annotations

import argparse
import compileall
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, harness_env, load_line, run_fresh, speed_line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the revision to compare against")
    parser.add_argument("--cwd", type=Path, required=True, help="where the command runs")
    parser.add_argument("--old-cwd", type=Path,
                        help="where the old side runs (default: --cwd): data it wrote itself")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable for both sides (repeatable)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each (default: 5)")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="-- then the harness's arguments")
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    if not args:
        parser.error("no harness arguments (after --)")
    extra = dict(item.split("=", 1) for item in options.env)
    # A CI limit or a kill sends SIGTERM, which runs no ``finally``: made an exit, so the
    # older checkout and its folder are removed whatever ends the comparison.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="harness-alternate-") as tmp:
        old = Path(tmp) / "old"
        try:
            subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(old),
                            options.old], cwd=ROOT, check=True)
            return _alternate(old, options, args, extra, Path(tmp))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT,
                           check=False, capture_output=True)
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)


def _alternate(old: Path, options: argparse.Namespace, args: list[str],
               extra: dict[str, str], tmp: Path) -> int:
    sides = {"old": old, "new": ROOT}
    cwds = {"old": options.old_cwd or options.cwd, "new": options.cwd}
    for checkout in sides.values():
        compileall.compile_dir(checkout / "harness", quiet=2)
    print(f"$ python -m harness {' '.join(args)}  (new in {cwds['new']}, old in {cwds['old']})",
          flush=True)
    print(f"old {options.old} against new (this checkout); {load_line()}")
    print(f"before: {speed_line()}")
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    peaks: dict[str, float] = {}
    for _ in range(options.repeat):
        for name, checkout in sides.items():
            env = harness_env(cwds[name] / "cache")
            env["PYTHONPATH"] = str(checkout)
            env.update(extra)
            run = run_fresh(args, env=env, cwd=cwds[name], out=tmp / name, timeout=600)
            if run.figures is None or run.figures.code != 0:
                print(f"{name}: the command failed: " + " | ".join(run.stderr_lines()[-3:]))
                return 1
            seconds[name].append(run.figures.seconds)
            cpu[name].append(run.figures.cpu)
            peaks[name] = max(peaks.get(name, 0.0), run.figures.peak_mib)
    print(f"after: {speed_line()}; {load_line()}")
    for name in sides:
        runs = " ".join(f"{s:.2f}" for s in sorted(seconds[name]))
        print(f"{name}: {runs}  median {statistics.median(seconds[name]):.2f} s, "
              f"CPU {statistics.median(cpu[name]):.2f} s, peak {peaks[name]:.0f} MiB")
    ratio = statistics.median(seconds["new"]) / statistics.median(seconds["old"])
    print(f"new / old: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the benchmarks that time ``python -m harness ...`` in fresh processes share.

bench/scale.py and bench/refusals.py both start every step as a fresh interpreter with
``PYTHONPATH`` at this checkout, read its wall seconds, CPU seconds (and of them the
system's), page faults and peak RSS through a small wrapper (:func:`run_fresh`), and head
their tables with the command, the revision and the load average. Imported as
``common``: a script's own folder is the first entry of ``sys.path``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Starts the run and reports its seconds, CPU seconds, peak RSS and exit code. A process
#: started from the benchmark itself would not do: Linux counts a child's peak from the
#: memory of the process it was forked from (scale.py's generator, a gigabyte at 100,000
#: cells), up to its exec. This wrapper is a fresh interpreter of ~10 MiB, less than any
#: step's own peak, so what it reads with ``os.wait4`` on the step's pid is the step's (and
#: that of any process the step waited for, such as pytest collecting cases).
WRAPPER = """\
import json, os, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
seconds = time.perf_counter() - start
code = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as fh:
    json.dump({"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime,
               "system": usage.ru_stime, "faults": usage.ru_minflt,
               "maxrss_kib": usage.ru_maxrss, "code": code}, fh)
"""


@dataclass(frozen=True)
class Figures:
    """What the wrapper reported of one run."""

    seconds: float
    cpu: float  # user + system: what other work on a shared machine moves least
    peak_mib: float  # ru_maxrss
    code: int
    # Of ``cpu``, the kernel's: mostly page faults, whose cost on a virtual machine moves by
    # several times within the hour.
    system: float = 0.0
    # Minor page faults (ru_minflt): pages first touched, or copied after a fork. A count
    # that does not move with the machine's minutes, as the seconds do.
    faults: int = 0


@dataclass(frozen=True)
class Fresh:
    """One fresh ``python -m harness ...``: its figures, or None if it left none."""

    figures: Figures | None  # None: killed at the time limit, or the wrapper itself failed
    timed_out: bool
    returncode: int  # the wrapper's
    stderr: Path

    def stderr_lines(self) -> list[str]:
        return self.stderr.read_text(encoding="utf-8", errors="replace").strip().splitlines()


def run_fresh(harness_args: Sequence[str], *, env: dict[str, str], cwd: Path, out: Path,
              timeout: float, stdout: Path | None = None) -> Fresh:
    """Run ``python -m harness *harness_args`` through :data:`WRAPPER`, in a session of its
    own so that a run past ``timeout`` seconds is killed with its children. Its stderr goes to
    ``out`` with the suffix .err, its figures to .json, its stdout to ``stdout`` (None: the
    null device)."""
    figures_path, stderr_path = out.with_suffix(".json"), out.with_suffix(".err")
    figures_path.unlink(missing_ok=True)
    argv = [sys.executable, "-c", WRAPPER, str(figures_path), sys.executable, "-m", "harness",
            *harness_args]
    with open(stderr_path, "wb") as err, open(stdout or os.devnull, "wb") as out_fh:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out_fh, stderr=err,
                                start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:  # past the limit, or this script interrupted: the run goes with its children
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):  # ended in the meantime
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    try:
        data = json.loads(figures_path.read_text(encoding="utf-8"))
        figures = Figures(data["seconds"], data["cpu"], data["maxrss_kib"] / 1024, data["code"],
                          data["system"], data["faults"])
    except (OSError, ValueError, KeyError):
        figures = None
    return Fresh(figures, timed_out, proc.returncode, stderr_path)


def harness_env(cache: Path) -> dict[str, str]:
    """This environment for a run of this checkout's harness: its own collection cache, the
    default cell limit, and no GitHub Actions step summary (not what is measured)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["HARNESS_CACHE_DIR"] = str(cache)
    for name in ("HARNESS_MAX_CELLS", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        env.pop(name, None)
    return env


def warm_cases(env: dict[str, str]) -> None:
    """Collect the repository's cases once, so that timed runs find the cache warm, as on any
    machine that planned before."""
    subprocess.run([sys.executable, "-m", "harness", "cases"], cwd=ROOT, env=env,
                   capture_output=True, check=False)


def command_line(argv: Sequence[str] | None) -> str:
    """How the benchmark was started, for the top of its table."""
    return "python " + " ".join(shlex.quote(a) for a in
                                [os.path.relpath(sys.argv[0]), *(argv or sys.argv[1:])])


def load_line(decimals: int = 1) -> str:
    """Other work on the machine moves every figure: say how busy it was."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average: unknown"
    return (f"load average {one:.{decimals}f} / {five:.{decimals}f} / {fifteen:.{decimals}f} "
            "(1 / 5 / 15 min)")


#: A fixed amount of interpreter work, then 256 MiB of memory the process never touched
#: (written a byte a page, twice: the second pass is the loop alone). Run in a fresh
#: interpreter so that the benchmark's own heap does not change it.
_SPEED_PROBE = r"""
import mmap, time
t = time.perf_counter()
s = 0
for i in range(3_000_000):
    s += i
loop = time.perf_counter() - t
size = 256 << 20
m = mmap.mmap(-1, size)
passes = []
for _ in range(2):
    t = time.perf_counter()
    for off in range(0, size, 4096):
        m[off] = 1
    passes.append(time.perf_counter() - t)
print(loop, max(passes[0] - passes[1], 0.0) / (size >> 12))
"""


def speed_line() -> str:
    """How fast this machine is right now, for figures taken at different times (a virtual
    machine just resumed runs slower at the same load, mostly in the kernel): a pure-Python
    loop, and what a page of memory costs the first time a process touches it."""
    try:
        out = subprocess.run([sys.executable, "-c", _SPEED_PROBE], capture_output=True,
                             text=True, check=True, timeout=120).stdout.split()
        loop, page = float(out[0]), float(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return "speed: unknown"
    return (f"speed: 3,000,000 additions in a Python loop {loop * 1000:.0f} ms; "
            f"a fresh page of memory {page * 1e6:.2f} µs")


def revision() -> str:
    """This checkout's commit, and whether harness/ differs from it."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "harness"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (" (harness/ modified)" if dirty else "")

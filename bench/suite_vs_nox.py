"""A maintainer's own test suite across environments: the harness against nox, same work.

einops' own tests (``pytest --pyargs einops.tests``, shipped in its wheel) in six uv
environments, torch 2.0.1 / 2.2.2 / 2.5.1 x numpy <2 / >=2, Python of this interpreter.
Prints the wall time of

  (a) ``nox -R``: nox's six sessions, one after the other, environments reused (no install);
  (b) ``harness run -j 1``: the same six sessions on one slot, report written;
  (c) ``harness run -j 2``: on two slots;

and the ratios b/a and c/a (the issue's goal: b/a <= 1.0, c/a clearly under it). Both tools'
environments are built first (not timed) from uv's cache; every figure is the median of
``--repeat``. Nothing else should run on the machine meanwhile.

    python bench/suite_vs_nox.py [--repeat 3] [--torch 2.0.1,2.2.2,2.5.1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NUMPY = ("<2", ">=2")
EINOPS = "0.8.1"
BACKENDS = "numpy,torch"

MATRIX = """\
version: 1
defaults: {{python: "{python}", timeout: 900}}
suites:
  einops:
    pyargs: einops.tests
    env: {{EINOPS_TEST_BACKENDS: "{backends}"}}
matrices:
  lib:
    suites: [einops]
    packages: ["einops=={einops}"]
    axes:
      torch: [{torch}]
      numpy: ["<2", ">=2"]
"""

NOXFILE = """\
import nox

nox.options.default_venv_backend = "uv"


@nox.session(python="{python}")
# ids: nox names a session's venv from its parameters, and "<2" and ">=2" both become "2"
# (one venv, reinstalled in turn), so each value gets a name of its own
@nox.parametrize("numpy", {numpy!r}, ids=["numpy1", "numpy2"])
@nox.parametrize("torch", {torch!r}, ids={torch_ids!r})
def einops(session, torch, numpy):
    session.install("einops=={einops}", f"torch=={{torch}}", f"numpy{{numpy}}", "pytest>=7")
    session.run("pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "einops.tests",
                env={{"EINOPS_TEST_BACKENDS": "{backends}"}}, success_codes=[0, 1])
"""


def timed(argv: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)
          ) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}"
                 f"{proc.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torch", default="2.0.1,2.2.2,2.5.1")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    torch = [t.strip() for t in args.torch.split(",") if t.strip()]
    work = args.keep or Path(tempfile.mkdtemp(prefix="suite-vs-nox-"))
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    (work / "matrix.yaml").write_text(MATRIX.format(
        python=pyver, backends=BACKENDS, einops=EINOPS,
        torch=", ".join(f'"{t}"' for t in torch)))
    (work / "noxfile.py").write_text(NOXFILE.format(
        python=pyver, numpy=list(NUMPY), torch=torch, einops=EINOPS, backends=BACKENDS,
        torch_ids=[f"torch{t}" for t in torch]))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(work / "cache")}
    env.pop("EINOPS_TEST_BACKENDS", None)
    # As on a maintainer's machine: Python writes bytecode (a CI image that sets this would
    # make nox compile torch's modules in every session; the harness keeps its own).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    harness = [python, "-m", "harness", "--reports", str(work / "reports"), "run", "-m",
               str(work / "matrix.yaml")]
    # nox's sessions accept pytest's exit 1 (torch 2.0.1 with numpy 2 fails tests); the
    # harness exits 1 when a test fails with no expectation saying it would.
    found = shutil.which("nox")
    if importlib.util.find_spec("nox") is None and found is None:
        sys.exit("nox is not installed: pip install nox")
    nox = ([python, "-m", "nox"] if importlib.util.find_spec("nox") else [str(found)])
    nox += ["-f", str(work / "noxfile.py")]
    print(f"{len(torch) * len(NUMPY)} environments: torch {', '.join(torch)} x numpy "
          f"{' / '.join(NUMPY)}, einops {EINOPS}'s own tests, Python {pyver}; in {work}")
    print("building both tools' environments (not timed) ...", flush=True)
    timed([*harness, "-j", "2", "--no-report"], work, env, (0, 1))
    timed(nox, work, env)
    timed([*nox, "-R"], work, env)  # nox's sessions compile their bytecode once, too
    figures: dict[str, list[float]] = {"nox -R": [], "harness run -j 1": [],
                                       "harness run -j 2": []}
    for _ in range(args.repeat):
        figures["nox -R"].append(timed([*nox, "-R"], work, env))
        figures["harness run -j 1"].append(timed([*harness, "-j", "1"], work, env, (0, 1)))
        figures["harness run -j 2"].append(timed([*harness, "-j", "2"], work, env, (0, 1)))
    median = {name: statistics.median(times) for name, times in figures.items()}
    for name, times in figures.items():
        each = ", ".join(f"{t:.1f}" for t in times)
        ratio = median[name] / median["nox -R"]
        print(f"{name:18} {median[name]:7.1f} s median ({each})   {ratio:.2f}x nox")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

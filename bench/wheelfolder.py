"""A runner realizing environments from a wheel folder, against a bare uv install of them.

A stand-in second machine for each measurement: a new harness cache, a new uv cache, no route
out (``unshare -n``, root) and every compiler on PATH wrapped to log its calls. For each
environment named, times

  (a) bare uv: ``uv venv`` + ``uv pip install --offline --no-index --find-links DIR`` (and
      DIR's key folders) of the environment's requirements, pytest and build requirements;
  (b) the harness: ``UvBackend.begin`` of the environment with ``--offline --find-links DIR``
      until its cells can start (the venv, the install), and until its check beside them
      has ended (one interpreter importing what it names, the fingerprint);

and prints b/a (issue 51's goal: <= 1.5) and whether any compiler ran. DIR is what
``harness envs build --into DIR`` and ``harness wheelhouse DIR`` made.

    python bench/wheelfolder.py --folder DIR --env 'llmfoundry-cpu:*' [-m matrix.yaml]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from fnmatch import fnmatchcase
from pathlib import Path

from harness.envs.sourcebuild import build_requirements
from harness.envs.uv import PYTEST_REQUIREMENT, find_interpreter
from harness.envs.wheelkey import filed
from harness.matrix.load import load_matrix
from harness.matrix.sources import with_find_links

ROOT = Path(__file__).resolve().parents[1]
REALIZE = ("import sys; from harness.matrix.load import load_matrix; "
           "from harness.matrix.sources import with_find_links; "
           "from harness.envs.uv import UvBackend; from pathlib import Path; "
           "spec = with_find_links(load_matrix(sys.argv[1]), (Path(sys.argv[2]),), offline=True); "
           "env = next(e for e in spec.environments if e.name == sys.argv[3]); "
           "import time; start = time.perf_counter(); "
           "began = UvBackend(Path(sys.argv[4])).begin(env); "
           "print(time.perf_counter() - start); began.checked and began.checked.result()")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds ``argv`` took with no route out, and what it printed."""
    start = time.perf_counter()
    done = subprocess.run(["unshare", "-n", *argv], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        sys.exit(f"{shlex.join(argv)[:200]} failed: {done.stderr[-1500:]}")
    return time.perf_counter() - start, done.stdout


def shims(folder: Path, log: Path) -> str:
    folder.mkdir()
    for name in ("gcc", "cc", "g++", "c++", "nvcc"):
        real = shutil.which(name) or "false"
        (folder / name).write_text(f'#!/bin/sh\n[ "$*" = --version ] || echo {name} >> {log}\n'
                                   f'exec {real} "$@"\n')
        (folder / name).chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--env", required=True, help="a glob of environment names")
    parser.add_argument("-m", "--matrix", type=Path, default=ROOT / "matrix.yaml")
    args = parser.parse_args()
    folder = args.folder.resolve()
    spec = with_find_links(load_matrix(args.matrix), (folder,), offline=True)
    keyed = [f"--find-links={e.folder}" for e in filed([str(folder)])]
    for env in (e for e in spec.environments if fnmatchcase(e.name, args.env)):
        figures = {}
        for side in ("bare", "harness"):
            with tempfile.TemporaryDirectory(prefix="wheelfolder-") as tmp:
                log = Path(tmp) / "compilers.log"
                variables = {**os.environ, "UV_CACHE_DIR": f"{tmp}/uv-cache",
                             "HARNESS_CACHE_DIR": f"{tmp}/cache", "UV_OFFLINE": "1",
                             "PATH": shims(Path(tmp) / "shims", log), "PYTHONPATH": str(ROOT)}
                if side == "bare":
                    venv = f"{tmp}/venv"
                    install = ["uv", "pip", "install", "--python", f"{venv}/bin/python",
                               "--offline", "--no-index", f"--find-links={folder}", *keyed,
                               *env.requirements, PYTEST_REQUIREMENT, *build_requirements(env)]
                    command = (f"uv venv -q -p {find_interpreter(env.python)} {venv} && "
                               + shlex.join(install))
                    figures[side] = timed(["bash", "-c", command], variables)[0]
                else:
                    total, said = timed([sys.executable, "-c", REALIZE, str(args.matrix),
                                         str(folder), env.name, f"{tmp}/cache"], variables)
                    figures[side], figures["checked"] = float(said.split()[-1]), total
                compiled = log.read_text().split() if log.exists() else []
                print(f"{env.name}: {side} {figures[side]:.1f} s, compilers run: "
                      f"{', '.join(compiled) or 'none'}", flush=True)
        print(f"{env.name}: harness / bare = {figures['harness'] / figures['bare']:.2f} until "
              f"cells can start, {figures['checked'] / figures['bare']:.2f} until checked "
              f"({figures['checked']:.1f} s, the harness's process start included)")


if __name__ == "__main__":
    main()

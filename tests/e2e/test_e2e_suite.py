"""A real third-party suite across real environments: einops' own tests (shipped inside its
PyPI wheel; its conftest refuses to run without EINOPS_TEST_BACKENDS) over torch 2.0.1 and
2.15.0 × numpy 1 and 2, beside a folder of tests that imports torch at the top. Each
environment's counts must equal bare pytest's in the same environment.

Slow: four uv environments with torch (hardlinked from uv's cache after the first time).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records.store import RunStore
from tests.conftest import DATA, ROOT, report_dir, report_line, write_matrix

pytestmark = pytest.mark.slow

MATRIX = f"""\
version: 1
defaults: {{python: "@PY@", timeout: 600}}
suites:
  einops:
    pyargs: einops.tests
    env: {{EINOPS_TEST_BACKENDS: "numpy,torch"}}
  torch-top:
    path: {DATA / 'torch_suite'}
    package: torch
matrices:
  lib:
    suites: [einops, torch-top]
    packages: ["einops==0.8.1"]
    axes:
      torch: ["2.0.1", "2.15.0"]
      numpy: ["<2", ">=2"]
"""
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e-suite")


def cache(workdir: Path) -> Path:
    return Path(os.environ.get("HARNESS_TEST_CACHE") or workdir / "cache")


@pytest.fixture(scope="module")
def run(workdir: Path) -> subprocess.CompletedProcess[str]:
    write_matrix(workdir / "matrix.yaml", MATRIX)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(cache(workdir))}
    env.pop("EINOPS_TEST_BACKENDS", None)  # nothing exported in the shell: the matrix says it
    return subprocess.run([sys.executable, "-m", "harness", "--reports",
                           str(workdir / "reports"), "run", "-j", "2"], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False, timeout=3000)


def bare_pytest(python: Path, args: list[str], env: dict[str, str], cwd: Path
                ) -> dict[str, int]:
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", *args], cwd=cwd,
                          env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                          text=True, check=False, timeout=900)
    last = proc.stdout.strip().splitlines()[-1]
    return {("error" if w.startswith("error") else w): int(n)
            for n, w in SUMMARY.findall(last.split(" in ")[0])}


def test_each_environment_counts_as_bare_pytest_in_it(
        workdir: Path, run: subprocess.CompletedProcess[str]) -> None:
    (run_dir,) = (workdir / "reports" / "runs").iterdir()
    results = RunStore(run_dir).results()
    sessions = {(r.environment, r.case_id): r for r in results if r.variant == "(session)"}
    assert len(sessions) == 8, run.stdout + run.stderr
    scratch = workdir / "elsewhere"
    scratch.mkdir(exist_ok=True)
    for (env, suite), session in sorted(sessions.items()):
        suite_info = session.details["suite"]
        (venv,) = [p for p in (cache(workdir) / "uv").iterdir() if p.is_dir()
                   and p.name.endswith(session.env_key)]
        python = venv / "bin" / "python"
        if suite == "einops":
            want = bare_pytest(python, ["--pyargs", "einops.tests"],
                               {"EINOPS_TEST_BACKENDS": "numpy,torch"}, scratch)
        else:
            want = bare_pytest(python, [str(DATA / "torch_suite")], {}, scratch)
        assert suite_info["counts"] == want, (env, suite, session.reason)
        (imported,) = suite_info["imported"]
        assert imported["installed"] and str(venv) in imported["file"], imported
        tests = [r for r in results if r.parent == session.cell_id]
        assert len(tests) == sum(want.values())
        report_line(f"suite {suite} in {env}: {session.outcome} "
                    + ", ".join(f"{n} {w}" for w, n in sorted(want.items()))
                    + " (equal to bare pytest's)")


def test_the_suite_page_says_what_differs_and_why(
        workdir: Path, run: subprocess.CompletedProcess[str]) -> None:
    md = (report_dir(workdir / "reports") / "compat.md").read_text(encoding="utf-8")
    assert "## Suite einops: `--pyargs einops.tests`" in md
    assert "## Suite torch-top:" in md
    # torch 2.0.1 was built against numpy 1; the test exists only from torch 2.1 on. The
    # folder is inside this repository: pytest takes its rootdir from our pyproject.toml.
    folder = "tests/data/torch_suite/test_torch_top.py"
    assert re.search(rf"`{folder}::test_from_numpy` .*\| fails with torch 2\.0\.1 with numpy 2\.",
                     md), md
    assert re.search(rf"`{folder}::test_compiler_namespace` .*\| not collected with torch "
                     r"2\.0\.1 \|", md), md
    assert "failure-einops" not in md and not list(
        report_dir(workdir / "reports").glob("failure-*.html"))  # no documented failure

"""The real thing: uv environments with real torch wheels, the mergekit case, the table.

Slow (two torch installs, ~4 GB each, hardlinked from uv's cache after the first time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records.store import RunStore
from tests.conftest import ROOT, report_dir, write_matrix

pytestmark = pytest.mark.slow

MATRIX = f"""\
version: 1
cases_dir: {ROOT / 'cases'}
defaults: {{python: "@PY@", timeout: 600}}
matrices:
  e2e:
    hardware: [cpu]
    cases: [mergekit_fp16]
    axes:
      torch:
        - {{torch: "2.0.1", transformers: "4.46.3"}}
        - {{torch: "2.15.0", transformers: "*"}}
      numpy: ["<2"]
environments:
  drifted:               # same content as e2e torch 2.0.1, but expects a CUDA 11.8 build
    hardware: [cpu]
    cuda: "11.8"
    cases: [mergekit_fp16]
    pins: {{torch: "2.0.1", transformers: "4.46.3", numpy: "<2"}}
  unbuildable:
    hardware: [cpu]
    cases: [mergekit_fp16]
    pins: {{torch: "0.0.1"}}
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


def harness(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cache = os.environ.get("HARNESS_TEST_CACHE") or str(workdir / "cache")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": cache}
    return subprocess.run([sys.executable, "-m", "harness", "--reports",
                           str(workdir / "reports"), *args], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False, timeout=3000)


@pytest.fixture(scope="module")
def first_run(workdir: Path) -> subprocess.CompletedProcess[str]:
    write_matrix(workdir / "matrix.yaml", MATRIX)
    return harness(workdir, "run", "-j", "2")


def outcomes(workdir: Path, run: str) -> dict[tuple[str, str], dict[str, object]]:
    # Through the store: a line holds its fingerprint by reference (shared/<hash>.json).
    rows = [r.to_dict() for r in RunStore(workdir / "reports" / "runs" / run).attempts()]
    return {(str(r["environment"]), str(r["variant"])): r for r in rows}


def latest(workdir: Path) -> str:
    # The last written: two runs of one second sort by their ids' random suffix.
    return max((workdir / "reports" / "runs").iterdir(), key=lambda p: p.stat().st_mtime_ns).name


def test_mergekit_reproduces_on_old_torch_and_passes_on_new(
        workdir: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    got = outcomes(workdir, latest(workdir))
    old, new = "e2e:torch=2.0.1,numpy<2", "e2e:torch=2.15.0,numpy<2"
    assert got[(old, "repro")]["outcome"] == "REPRODUCED", first_run.stdout + first_run.stderr
    assert got[(old, "repro")]["signature"] == "addmm-half-cpu"
    assert got[(new, "repro")]["outcome"] == "PASS"
    for env in (old, new):
        assert got[(env, "workaround[bfloat16]")]["outcome"] == "PASS"
        assert got[(env, "workaround[float32]")]["outcome"] == "PASS"
        assert got[(env, "workaround_cuda")]["outcome"] == "SKIP"
    fingerprint = got[(old, "repro")]["fingerprint"]
    assert fingerprint["key"]["torch"] == "2.0.1"  # type: ignore[index]
    table = (report_dir(workdir / "reports") / "compat.md").read_text()
    assert "🐞 REPRODUCED" in table and old in table and new in table
    assert first_run.returncode == 1  # the drifted and unbuildable environments are ERROR


def test_drift_and_build_failure_are_errors_and_the_rest_goes_on(
        workdir: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    got = outcomes(workdir, latest(workdir))
    drift = got[("drifted", "repro")]
    assert drift["outcome"] == "ERROR"
    assert "drift: asked CUDA 11.8, got a CUDA 11.7 build (torch 2.0.1" in str(drift["reason"])
    broken = got[("unbuildable", "repro")]
    assert broken["outcome"] == "ERROR" and "torch==0.0.1" in str(broken["reason"])


def test_environment_holds_only_its_spec_and_pytest(
        workdir: Path, first_run: subprocess.CompletedProcess[str]) -> None:
    cache = Path(os.environ.get("HARNESS_TEST_CACHE") or workdir / "cache")
    (venv,) = [p for p in (cache / "uv").iterdir() if p.name.startswith("e2e-torch-2.0.1")
               and p.is_dir()]
    probe = "import importlib.util as u; print([m for m in ('harness', 'pandas', 'rich', " \
            "'tabulate') if u.find_spec(m)])"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True,
                         text=True, check=True, env={"PATH": os.environ["PATH"]},
                         cwd=workdir).stdout
    assert out.strip() == "[]"


def test_rerun_rebuilds_nothing(workdir: Path,
                                first_run: subprocess.CompletedProcess[str]) -> None:
    proc = harness(workdir, "run", "-j", "2", "--only", "torch=2.0.1", "-k", "repro")
    assert "e2e:torch=2.0.1,numpy<2: up to date, nothing rebuilt" in proc.stderr
    assert ": built" not in proc.stderr

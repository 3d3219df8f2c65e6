"""``harness bisect --between`` for real: environments built by uv, cells run by pytest.

Small real wheels against a local index show the mechanics (a top-level package's own
dependency moves with it and is not pinned apart; an answer no trial could settle is
inconclusive). The slow lane does the issue's two cases with PyPI's torch wheels."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.records.bisects import FOLDER
from harness.records.store import RunStore
from tests.conftest import ROOT, report_line, write_matrix
from tests.e2e.test_e2e_bisect import CASE
from tests.inproc import harness_main
from tests.packages import make_wheel

# x and y are top-level (an axis, a `packages:` pin); x brings dep, whose version follows x's.
# a and b are top-level, and each one's 2.0 needs the other's: neither moves alone.
MATRIX = """\
version: 1
defaults: {python: "@PY@", timeout: 300}
matrices:
  xy:
    hardware: [cpu]
    cases: [between_x]
    axes:
      x: ["1.0"]
    packages: ["mlcompat-between-y==1.0"]
  ab:
    hardware: [cpu]
    cases: [between_a]
    axes:
      a: ["1.0"]
    packages: ["mlcompat-between-b==1.0"]
distributions:
  x: mlcompat-between-x
  a: mlcompat-between-a
"""
REQUIRES = {("x", "1.0"): ("mlcompat-between-dep<2",), ("x", "2.0"): ("mlcompat-between-dep>=2",),
            ("a", "2.0"): ("mlcompat-between-b>=2",), ("b", "2.0"): ("mlcompat-between-a>=2",)}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("between")
    wheels = root / "wheels"
    wheels.mkdir()
    for name in ("x", "y", "dep", "a", "b"):
        for version in ("1.0", "2.0"):
            make_wheel(wheels, f"mlcompat-between-{name}", version,
                       {f"mlcompat_between_{name}/__init__.py": f"BROKEN = {version == '2.0'}\n"},
                       requires=REQUIRES.get((name, version), ()))
    cases = root / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    for name in ("x", "a"):
        # test_e2e_bisect's case, of this package: fails when its release is "broken".
        (cases / f"test_between_{name}.py").write_text(
            CASE.replace("mlcompat_bisect_probe", f"mlcompat_between_{name}"))
    write_matrix(root / "matrix.yaml", MATRIX)
    return root


def harness(workdir: Path, *args: str, wheels: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(workdir / "cache")}
    links = ["--find-links", str(workdir / "wheels")] if wheels else []
    return subprocess.run([sys.executable, "-m", "harness", "--reports",
                           str(workdir / "reports"), *args, *links], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False, timeout=3000)


def ran(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def ends(workdir: Path) -> None:
    ran(harness(workdir, "run", "--run-id", "good"))
    ran(harness(workdir, "run", "--run-id", "bad", "--set",
                "x=2.0,mlcompat-between-y=2.0,a=2.0,mlcompat-between-b=2.0"))
    bad = RunStore.open(workdir / "reports", "bad")
    assert sorted(str(r.outcome) for r in bad.results()) == ["REPRODUCED", "REPRODUCED"]


def finding(workdir: Path, stdout: str) -> dict[str, object]:
    path = stdout.rsplit("bisect: recorded ", 1)[1].strip()
    assert Path(path).parent == workdir / "reports" / FOLDER
    data: dict[str, object] = json.loads(Path(path).read_text())
    return data


def test_only_top_level_packages_are_pinned(workdir: Path, ends: None) -> None:
    done = harness(workdir, "bisect", "--between", "good", "bad", "-k", "between_x::repro")
    out = ran(done)
    # dep moved too, with x: pinning it apart from x made trials that do not resolve.
    assert "2 top-level packages moved (of 3 packages that moved" in out
    assert "bisect: flips when mlcompat-between-x 1.0 → 2.0 moves (1 trial)" in out
    data = finding(workdir, out)
    assert data["verdict"] == "found"
    assert data["culprits"] == [["mlcompat-between-x", "1.0", "2.0"]]
    (trial,) = data["trials"]  # type: ignore[misc]
    store = RunStore.open(workdir / "reports", trial["run_id"])
    assert store.meta["set"] == {"mlcompat-between-x": "2.0", "mlcompat-between-y": "1.0"}


def test_an_answer_no_trial_could_settle_is_inconclusive(workdir: Path, ends: None) -> None:
    done = harness(workdir, "bisect", "--between", "good", "bad", "-k", "between_a::repro")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert ("bisect: inconclusive: which of mlcompat-between-a 1.0 → 2.0 and "
            "mlcompat-between-b 1.0 → 2.0 flips it is not determined (2 trials, 2 said "
            "nothing)") in out
    assert "flips when" not in out
    # What it could not build, and why, in the output and in each trial's record.
    assert "  mlcompat-between-a 1.0 -> 2.0: could not be built: " in out
    assert "  mlcompat-between-b 1.0 -> 2.0: could not be built: " in out
    data = finding(workdir, out)
    assert (data["verdict"], data["culprits"]) == ("inconclusive", [])
    for trial in data["trials"]:  # type: ignore[attr-defined]
        assert trial["flips"] is None and trial["outcome"] == "could not be built"
        assert "mlcompat-between" in trial["reason"], trial


def test_the_same_run_twice_is_refused(workdir: Path, ends: None,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    done = harness_main(capsys, "--reports", str(workdir / "reports"), "bisect", "--between",
                        "good", "good", "-k", "between_x::repro", cwd=workdir)
    assert done.returncode == 2
    assert done.stderr.startswith("harness: error: --between names run good twice")


# The two cases, with PyPI's torch wheels (CUDA builds; they run on the CPU).
TORCH = """\
version: 1
cases_dir: @CASES@
defaults: {python: "3.11", timeout: 900}
matrices:
  bridge:
    hardware: [cpu]
    cases: [probes, mergekit_fp16]
    packages: ["transformers==4.46.3"]
    axes:
      torch: ["2.1.2"]
      numpy: ["1.26.4"]
"""


@pytest.mark.slow
def test_torch_and_numpy_move_together_and_each_case_names_its_own(tmp_path: Path) -> None:
    started = time.monotonic()
    write_matrix(tmp_path / "matrix.yaml", TORCH.replace("@CASES@", str(ROOT / "cases")))
    ran(harness(tmp_path, "run", "--run-id", "good", wheels=False))
    ran(harness(tmp_path, "run", "--run-id", "bad", "--set", "torch=2.2.2,numpy=>=2",
                wheels=False))
    found = {(r.case_id, r.variant, str(r.outcome))
             for run in ("good", "bad") for r in RunStore.open(tmp_path / "reports",
                                                              run).results()}
    assert found >= {("probes", "numpy_bridge", "PASS"), ("probes", "numpy_bridge",
                                                           "REPRODUCED"),
                     ("mergekit_fp16", "repro", "REPRODUCED"), ("mergekit_fp16", "repro",
                                                                "PASS")}, found
    # numpy 2 breaks the bridge of torch < 2.3, whichever of 2.1 and 2.2: numpy alone.
    bridge = ran(harness(tmp_path, "bisect", "--between", "good", "bad", "-k",
                         "probes::numpy_bridge", wheels=False))
    assert "bisect: flips when numpy 1.26.4 → 2." in bridge
    assert " moves (1 trial)" in bridge
    # The CPU's float16 addmm came with torch 2.2, whatever numpy: torch alone.
    fp16 = ran(harness(tmp_path, "bisect", "--between", "good", "bad", "-k",
                       "mergekit_fp16::repro", wheels=False))
    assert "bisect: flips when torch 2.1.2 → 2.2.2 moves (2 trials)" in fp16
    for out in (bridge, fp16):
        assert "2 top-level packages moved" in out
        assert "could not be built" not in out and "said nothing" not in out
    report_line(f"bisect --between, torch 2.1.2 + numpy 1 -> torch 2.2.2 + numpy 2: "
                f"{bridge.splitlines()[-2]}; {fp16.splitlines()[-2]} "
                f"({time.monotonic() - started:.0f} s)")

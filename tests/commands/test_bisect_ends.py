"""``harness bisect --axis``: its ends checked before anything is built, its recorded ends
found among all runs, and a boundary it could not pin down said to be inconclusive. Real
runs against a local index of small wheels (test_e2e_bisect's probe, 1.0 ... 1.7, broken
before 1.5; here 1.4 cannot be installed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records.bisects import read_bisects
from harness.records.store import RunStore
from tests.conftest import ROOT, write_matrix
from tests.e2e.test_e2e_bisect import MATRIX, probe_workdir
from tests.inproc import Ran, harness_main
from tests.packages import make_wheel

# The probe's releases linked with a helper, as torch's are with transformers.
LINKED = MATRIX.replace('probe: ["1.0", "1.7"]', """probe:
        - {probe: "1.0", helper: "1.0"}
        - {probe: "1.7", helper: "2.0"}""") + "  helper: mlcompat-ends-helper\n"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 1.4 cannot be built.
    root = probe_workdir(tmp_path_factory.mktemp("ends"), unbuildable="1.4")
    for version in ("1.0", "2.0"):
        make_wheel(root / "wheels", "mlcompat-ends-helper", version,
                   {"mlcompat_ends_helper/__init__.py": ""})
    write_matrix(root / "linked.yaml", LINKED)
    return root


def harness(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(workdir / "cache")}
    return subprocess.run([sys.executable, "-m", "harness", "--reports",
                           str(workdir / "reports"), *args, "--find-links",
                           str(workdir / "wheels")], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False, timeout=1200)


def refused(workdir: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Ran:
    """A bisect refused before it builds anything, in this process: one line, exit 2."""
    return harness_main(capsys, "--reports", str(workdir / "reports"), "bisect", *args,
                        "--find-links", str(workdir / "wheels"), cwd=workdir,
                        env={"HARNESS_CACHE_DIR": str(workdir / "cache")})


def runs(workdir: Path) -> set[str]:
    folder = workdir / "reports" / "runs"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


@pytest.fixture(scope="module")
def night(workdir: Path) -> RunStore:
    done = harness(workdir, "run", "-j", "2", "--run-id", "night")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return RunStore.open(workdir / "reports", "night")


@pytest.mark.parametrize(("good", "bad", "said"), [
    ("1.7", "1.0", "--good 1.7 is newer than --bad 1.0: --good is the older release of probe"),
    ("1.3", "1.3", "--good and --bad are both probe 1.3"),
    ("banana", "1.7", "--good banana: not a release of probe (a version, like 2.2.2)"),
    ("1.0", "1.9", "--bad 1.9: mlcompat-bisect-probe has no release 1.9 on the index"),
])
def test_ends_are_checked_before_anything_is_built(workdir: Path, good: str, bad: str,
                                                   said: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    before = runs(workdir)
    done = refused(workdir, capsys, "--axis", "probe", "-k", "probe::repro", "--good", good,
                   "--bad", bad)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith(f"harness: error: {said}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "probing" not in done.stdout and "new failure" not in done.stdout
    assert runs(workdir) == before  # nothing built, nothing run


def test_a_selection_that_differs_in_a_linked_value_is_refused_naming_it(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = refused(workdir, capsys, "-m", str(workdir / "linked.yaml"), "--axis", "probe",
                   "-k", "probe::repro", "--good", "1.0", "--bad", "1.7")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "differ in helper (1.0, 2.0)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_recorded_ends_are_found_among_all_runs(workdir: Path, night: RunStore) -> None:
    # More runs than bisect used to look back over, none with the cell, after the night's.
    (other,) = night.results()[:1]
    for i in range(12):
        filler = RunStore.create(workdir / "reports", {"matrix": "other.yaml"},
                                 run_id=f"other-{i}")
        filler.append(other.replace(run_id=filler.run_id, cell_id=f"other-{i}",
                                    environment=f"other:{i}"))
    before = runs(workdir)
    done = harness(workdir, "bisect", "--axis", "probe", "-k", "probe::repro", "--good", "1.0",
                   "--bad", "1.7")
    out = done.stdout
    assert "bisect: probe 1.0: REPRODUCED (old-probe), recorded in run night" in out
    assert "bisect: probe 1.7: PASS, recorded in run night" in out
    made = runs(workdir) - before
    assert made and not any(r.endswith(("-probe-1.0", "-probe-1.7")) for r in made), made
    # where --set landed is said once for each probe run, not for an end looked up
    said = re.findall(r"--set probe=([\d.]+): replaced in", done.stderr)
    assert len(said) == len(set(said)) == len(made), done.stderr
    assert not {"1.0", "1.7"} & set(said), done.stderr
    # 1.4 could not be built: the change is at 1.4 or 1.5, and that is not an answer.
    assert done.returncode == 1, out + done.stderr
    assert ("bisect: inconclusive: the change is at 1.5 or at one of the releases before it "
            "that could not be built:\n  1.4: ") in out
    (record,) = read_bisects(workdir / "reports")
    assert record.untested == ["1.4"]
    assert (record.last["version"], record.first["version"]) == ("1.3", "1.5")

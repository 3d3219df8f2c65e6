"""A bump and a bisect for real, against a local index: a folder of small real wheels of a
package (``mlcompat-bisect-probe``, 1.0 ... 1.7, broken before 1.5) that a case reproduces
the failure of. Environments are built by uv, cells run by pytest, the report checked."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.records.bisects import read_bisects
from harness.records.store import RunStore
from tests.conftest import ROOT, write_matrix
from tests.inproc import Ran, harness_main
from tests.packages import make_wheel

VERSIONS = [f"1.{i}" for i in range(8)]
CASE = '''\
"""A package that was broken before 1.5."""

from harness_case import Signature

OLD = Signature("old-probe", "ValueError", r"the probe package is broken")


@OLD.reproduces
def test_repro() -> None:
    import mlcompat_bisect_probe as probe

    if probe.BROKEN:
        raise ValueError("the probe package is broken")
'''
MATRIX = """\
version: 1
cases_dir: cases
defaults: {python: "@PY@", timeout: 300}
matrices:
  m:
    hardware: [cpu]
    axes:
      probe: ["1.0", "1.7"]
distributions:
  probe: mlcompat-bisect-probe
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return probe_workdir(tmp_path_factory.mktemp("bisect"))


def probe_workdir(root: Path, unbuildable: str = "") -> Path:
    """The probe's wheels, case and matrix under ``root``; the release ``unbuildable`` asks
    for a package no index has."""
    wheels = root / "wheels"
    wheels.mkdir()
    for version in VERSIONS:
        broken = tuple(int(p) for p in version.split(".")) < (1, 5)
        make_wheel(wheels, "mlcompat-bisect-probe", version,
                   {"mlcompat_bisect_probe/__init__.py": f"BROKEN = {broken}\n"},
                   requires=("mlcompat-bisect-nowhere>=9",) if version == unbuildable else ())
    cases = root / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    (cases / "test_probe.py").write_text(CASE)
    write_matrix(root / "matrix.yaml", MATRIX)
    return root


def harness(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE_DIR": str(workdir / "cache")}
    wheels = ["--find-links", str(workdir / "wheels")] if args[0] != "report" else []
    done = subprocess.run([sys.executable, "-m", "harness", "--reports",
                           str(workdir / "reports"), *args, *wheels], cwd=workdir, env=env,
                          capture_output=True, text=True, check=False, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def here(capsys: pytest.CaptureFixture[str], workdir: Path, *args: str) -> Ran:
    """``harness`` in this process, for a command that builds nothing (plan, lock)."""
    done = harness_main(capsys, "--reports", str(workdir / "reports"), *args, "--find-links",
                        str(workdir / "wheels"), cwd=workdir,
                        env={"HARNESS_CACHE_DIR": str(workdir / "cache")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def night(workdir: Path) -> RunStore:
    harness(workdir, "run", "-j", "2", "--run-id", "night")
    return RunStore.open(workdir / "reports", "night")


def outcomes(store: RunStore) -> dict[str, str]:
    return {r.environment: str(r.outcome) for r in store.results()}


def test_the_night_run_sees_both_outcomes(night: RunStore) -> None:
    assert outcomes(night) == {"m:probe=1.0": "REPRODUCED", "m:probe=1.7": "PASS"}


def test_bisect_builds_only_what_binary_search_needs(workdir: Path, night: RunStore) -> None:
    # The ends chosen with --only, as a user narrows a wider matrix: probes at other
    # releases are not filtered away by them.
    done = harness(workdir, "bisect", "--axis", "probe", "-k", "probe::repro",
                   "--only", "probe=1.0", "--only", "probe=1.7")
    out = done.stdout
    assert "from run night: probe 1.0 REPRODUCED (old-probe), 1.7 PASS" in out
    assert "6 releases of probe between 1.0 and 1.7; at most 3 to build" in out
    assert ("bisect: first fixed in mlcompat-bisect-probe 1.5 (last REPRODUCED (old-probe): "
            "mlcompat-bisect-probe 1.4; repro @cpu); 3 of 6 releases probed") in out
    (record,) = read_bisects(workdir / "reports")
    assert (record.last["version"], record.first["version"]) == ("1.4", "1.5")
    probes = [p["run_id"] for p in record.probes]
    assert 1 <= len(probes) <= 3  # ceil(log2(6)) + 1 = 4 allowed; binary search needs 3
    # Each probe is an ordinary run with its one cell, of the release it probed.
    for probe in record.probes:
        store = RunStore.open(workdir / "reports", probe["run_id"])
        assert store.meta["set"] == {"probe": probe["version"]}
        assert [r.environment for r in store.results()] == [f"m:probe={probe['version']}"]
    # Where each probe's --set landed is said once; the recorded ends were looked up quietly.
    said = re.findall(r"--set probe=([\d.]+): replaced in", done.stderr)
    assert sorted(said) == sorted(p["version"] for p in record.probes), done.stderr
    # The failure page says it, and the check proves it from the probes' runs.
    report = harness(workdir, "report", "night", "--check")
    assert "follows from the record" in report.stdout
    page = (night.run_dir / "report" / "compat.md").read_text()
    assert ("bisect: first fixed in mlcompat-bisect-probe 1.5 (last REPRODUCED (old-probe): "
            "mlcompat-bisect-probe 1.4; repro @cpu)") in page
    # A record that says other than its probes' runs is caught.
    path = next((workdir / "reports" / "bisects").glob("*.json"))
    kept = path.read_text()
    data = json.loads(kept)
    data["first"]["outcome"] = "FAIL"
    path.write_text(json.dumps(data))
    # The command's check, as a user runs it.
    env = dict(os.environ)
    try:
        caught = subprocess.run([sys.executable, "-m", "harness", "--reports",
                                 str(workdir / "reports"), "report", "night", "--check"],
                                env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True,
                                text=True, check=False)
    finally:
        path.write_text(kept)
    assert caught.returncode == 1, caught.stderr
    assert "which no bisect of probe shows in its probes' runs" in caught.stdout


def test_a_bump_in_one_line_says_what_changed(workdir: Path, night: RunStore) -> None:
    done = harness(workdir, "run", "--set", "probe=1.3", "--run-id", "bump")
    assert "--set probe=1.3: replaced in matrices.m" in done.stderr
    assert ("what changed since night: 0 outcomes moved\n- replaced: m:probe=1.0 -> "
            "m:probe=1.3 (1 cell compared, 1 kept their outcome)") in done.stdout
    bump = RunStore.open(workdir / "reports", "bump")
    assert outcomes(bump) == {"m:probe=1.3": "REPRODUCED"}
    data = json.loads((bump.run_dir / "report" / "compat.json").read_text())
    assert data["since"] == "night"
    (change,) = data["changes"]
    # Compared with the cell of the release in force for 1.3 (the newest up to it: 1.0's).
    assert change["versions"] == {"probe": "1.0 -> 1.3"}
    assert (change["class"], change["before"], change["after"]) == (
        "versions changed", "REPRODUCED", "REPRODUCED")
    # The report says it is a bump, and of what (an environment's name may say otherwise).
    for page in ("compat.md", "index.html", "summary.txt"):
        assert "bumped: --set probe=1.3" in (bump.run_dir / "report" / page).read_text()
    night_md = (night.run_dir / "report" / "compat.md").read_text()
    assert "bumped" not in night_md


def test_a_query_axis_against_the_local_index_and_the_lock(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = workdir / "query.yaml"
    write_matrix(matrix, MATRIX.replace('probe: ["1.0", "1.7"]',
                                        'probe: {releases: ">=1.2,<1.6", pick: all}'))
    plan = here(capsys, workdir, "plan", "-m", str(matrix))
    assert "4 cells in 4 environments" in plan.stdout
    locked = json.loads((workdir / "query.lock.json").read_text())
    assert locked["resolutions"][0]["versions"] == ["1.2", "1.3", "1.4", "1.5"]
    (workdir / "wheels" / "mlcompat_bisect_probe-1.3-py3-none-any.whl").rename(
        workdir / "moved.whl")  # a release leaves the index: the lock still plans it
    try:
        assert "4 cells" in here(capsys, workdir, "plan", "-m", str(matrix), "--offline").stdout
        relocked = here(capsys, workdir, "lock", "-m", str(matrix))
        assert "gone: mlcompat-bisect-probe 1.3" in relocked.stdout
    finally:
        (workdir / "moved.whl").rename(
            workdir / "wheels" / "mlcompat_bisect_probe-1.3-py3-none-any.whl")


PAIR_CASE = '''\
"""Two packages that break only together."""

from harness_case import Signature

CLASH = Signature("clash", "ValueError", r"the new a and the new b clash")


@CLASH.reproduces
def test_both() -> None:
    import mlcompat_ddmin_a as a
    import mlcompat_ddmin_b as b

    if a.NEW and b.NEW:
        raise ValueError("the new a and the new b clash")
'''
PAIR = """\
version: 1
cases_dir: pair_cases
defaults: {python: "@PY@", timeout: 300}
matrices:
  pair:
    hardware: [cpu]
    axes:
      a: ["1.0"]
    packages: ["mlcompat-ddmin-b==1.0", "mlcompat-ddmin-c==1.0"]
distributions:
  a: mlcompat-ddmin-a
"""


def test_between_two_runs_finds_the_packages_that_flip_together(workdir: Path) -> None:
    for name in ("a", "b", "c"):
        for version in ("1.0", "2.0"):
            make_wheel(workdir / "wheels", f"mlcompat-ddmin-{name}", version,
                       {f"mlcompat_ddmin_{name}/__init__.py": f"NEW = {version == '2.0'}\n"})
    cases = workdir / "pair_cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    (cases / "test_pair.py").write_text(PAIR_CASE)
    matrix = write_matrix(workdir / "pair.yaml", PAIR)
    harness(workdir, "run", "-m", str(matrix), "--run-id", "pair-good")
    # The bump that broke it moved three packages at once (two named only in packages:).
    harness(workdir, "run", "-m", str(matrix), "--run-id", "pair-bad", "--set",
            "a=2.0,mlcompat-ddmin-b=2.0,mlcompat-ddmin-c=2.0")
    assert [str(r.outcome) for r in RunStore.open(workdir / "reports", "pair-bad").results()
            ] == ["REPRODUCED"]
    done = harness(workdir, "bisect", "-m", str(matrix), "--between", "pair-good", "pair-bad",
                   "-k", "pair::both")
    assert "3 top-level packages moved" in done.stdout
    assert ("flips when mlcompat-ddmin-a 1.0 → 2.0 and mlcompat-ddmin-b 1.0 → 2.0 move "
            "together") in done.stdout

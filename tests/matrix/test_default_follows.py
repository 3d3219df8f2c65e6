"""The default matrix's CPU slice follows the index: a new torch is planned the night it
appears (the nightly's `harness lock`), and the committed lock plans it on a fresh clone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.matrix.load import load_matrix
from harness.matrix.releases import Releases, lock_path, machine_platform
from tests.conftest import ROOT
from tests.matrix.test_queries import simple_index, torch_files

LOCKED = ROOT / "matrix.lock.json"
NEWEST = ("2.13.0", "2.14.1", "2.15.0")  # what the committed lock holds


def cpu_envs(text: str) -> list[str]:
    return sorted({word for word in text.split() if word.startswith("cpu:")})


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """matrix.yaml and its lock as committed, beside an index that has one torch more."""
    path = tmp_path / "matrix.yaml"
    path.write_text((ROOT / "matrix.yaml").read_text().replace(
        "\ncases_dir: cases\n", f"\ncases_dir: {ROOT / 'cases'}\n"))
    shutil.copy(LOCKED, lock_path(path))
    root = simple_index(tmp_path / "simple", "torch",
                        torch_files("2.5.1", "2.12.1", *NEWEST, "2.16.0"))
    monkeypatch.setenv("UV_DEFAULT_INDEX", root.as_uri())
    for name in ("UV_INDEX_URL", "PIP_INDEX_URL", "HARNESS_OFFLINE", "HARNESS_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.mark.skipif(machine_platform() != "linux_x86_64",
                    reason="the committed lock holds linux_x86_64's answer")
def test_the_committed_lock_plans_the_default_matrix_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", (tmp_path / "nowhere").as_uri())
    spec = load_matrix(ROOT / "matrix.yaml",
                       releases=Releases.for_matrix(ROOT / "matrix.yaml", mode="offline"))
    (resolution,) = spec.resolutions
    assert (resolution.query.dist, resolution.versions) == ("torch", NEWEST)
    cpu = {e.name: e for e in spec.environments if e.origin == "matrices.cpu"}
    assert sorted({dict(e.values)["torch"] for e in cpu.values()}) == sorted(
        ["2.0.1", "2.2.2", "2.5.1", *NEWEST])
    assert len(cpu) == 12
    # The pinned releases keep their transformers; the newest take the newest one.
    assert "transformers==4.46.3" in cpu["cpu:torch=2.5.1,numpy<2"].requirements
    assert "transformers" in cpu["cpu:torch=2.15.0,numpy>=2"].requirements


def test_lock_on_the_default_matrix_resolves_the_cpu_torch_axis(
        clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lock", "-m", str(clone)]) == 0
    out = capsys.readouterr().out
    assert "torch>2.5 pick=latest-patch latest=3 for Python 3.11: 2.14.1, 2.15.0, 2.16.0" in out
    assert "new: torch 2.16.0" in out and "gone: torch 2.13.0" in out
    (entry,) = json.loads(lock_path(clone).read_text())["resolutions"]
    assert entry["versions"] == ["2.14.1", "2.15.0", "2.16.0"]


def test_a_newer_torch_appears_in_plan_refresh_not_in_a_plain_plan(
        clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-m", str(clone), "--only", "env=cpu:*"]) == 0
    plain = cpu_envs(capsys.readouterr().out)
    assert "cpu:torch=2.16.0,numpy<2" not in plain  # the lock answers, not the index
    assert "cpu:torch=2.13.0,numpy<2" in plain
    assert main(["plan", "-m", str(clone), "--only", "env=cpu:*", "--refresh"]) == 0
    captured = capsys.readouterr()
    refreshed = cpu_envs(captured.out)
    assert {"cpu:torch=2.16.0,numpy<2", "cpu:torch=2.16.0,numpy>=2"} <= set(refreshed)
    assert "cpu:torch=2.13.0,numpy<2" not in refreshed  # three minor series, the newest
    assert "cpu:torch=2.0.1,numpy<2" in refreshed  # beside the pinned ones
    assert len(refreshed) == len(plain) == 12
    assert "new: torch 2.16.0" in captured.err


@pytest.mark.parametrize(("value", "transformers"), [
    ("2.16.0", "transformers"),  # past the pinned rows: the query's when: pins
    ("2.2.0", "transformers==4.46.3"),  # the pinned row in force (2.0.1's)
])
def test_a_set_torch_takes_what_goes_with_it(clone: Path, value: str, transformers: str) -> None:
    before = lock_path(clone).read_text()
    spec = load_matrix(clone, overrides=(("torch", value),))
    (cpu,) = {e.requirements for e in spec.environments
              if e.name == f"cpu:torch={value},numpy<2"}
    assert transformers in cpu and f"torch=={value}" in cpu
    assert lock_path(clone).read_text() == before


def test_a_query_item_adds_releases_to_the_listed_ones_once_each(
        clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clone.write_text(f"version: 1\ncases_dir: {ROOT / 'cases'}\nmatrices:\n  cpu:\n"
                     "    cases: [probes]\n    axes:\n"
                     "      torch: ['2.5.1', {releases: '>=2.5,<2.13', latest: 2}]\n")
    lock_path(clone).unlink()
    assert main(["plan", "-m", str(clone)]) == 0
    assert cpu_envs(capsys.readouterr().out) == ["cpu:torch=2.12.1", "cpu:torch=2.5.1"]


def test_a_set_names_only_the_matrix_in_use(clone: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-m", str(clone), "--set", "torch=2.15.0", "--only", "env=cpu:*"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "--set" in line]
    assert notes == ["harness: --set torch=2.15.0: replaced in matrices.cpu"]

"""A lock survives ``--set``: only ``harness lock`` and ``--refresh`` rewrite it."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.matrix.releases import lock_path
from tests.conftest import ROOT
from tests.matrix.test_queries import MATRIX as QUERY_MATRIX
from tests.matrix.test_queries import simple_index, torch_files

MATRIX = QUERY_MATRIX.replace('defaults: {python: "3.11"}', f"cases_dir: {ROOT / 'cases'}\n"
                              'defaults: {python: "3.11", cases: [probes]}')


@pytest.fixture
def matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = simple_index(tmp_path / "simple", "torch", {
        **torch_files("2.0.1", "2.1.2", "2.2.2"), **torch_files("2.2.2", python="cp312")})
    monkeypatch.setenv("UV_DEFAULT_INDEX", root.as_uri())
    for name in ("UV_INDEX_URL", "PIP_INDEX_URL", "HARNESS_OFFLINE", "HARNESS_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "bump-query.yaml"
    path.write_text(MATRIX)
    return path


def test_a_set_plan_leaves_the_lock_as_it_was(matrix: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-m", str(matrix)]) == 0
    written = lock_path(matrix).read_text()
    assert '"2.2.2"' in written
    for sets in (["--set", "torch=2.1.2"], ["--set", "numpy=<2"], ["--set", "python=3.12"]):
        assert main(["plan", "-m", str(matrix), *sets]) == 0
        assert lock_path(matrix).read_text() == written, sets
    capsys.readouterr()
    # The lock still answers: offline plans from it, and `harness lock` finds nothing new.
    assert main(["plan", "-m", str(matrix), "--offline"]) == 0
    assert "5 environments" in capsys.readouterr().out
    assert main(["lock", "-m", str(matrix)]) == 0
    out = capsys.readouterr().out
    assert "new query" not in out
    assert "no release came or went since the lock" in out


def test_a_set_plan_does_not_write_a_lock_where_there_was_none(
        matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-m", str(matrix), "--set", "numpy=<2"]) == 0
    assert "cpu:torch=2.2.2,numpy<2" in capsys.readouterr().out  # asked the index
    assert not lock_path(matrix).exists()


def test_refresh_renews_and_lock_drops_what_the_matrix_no_longer_asks(
        matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-m", str(matrix)]) == 0
    simple_index(matrix.parent / "simple", "torch", torch_files("2.0.1", "2.1.2", "2.2.2",
                                                                "2.3.0"))
    assert main(["plan", "-m", str(matrix), "--refresh"]) == 0
    assert '"2.3.0"' in lock_path(matrix).read_text()
    # A query the matrix no longer asks: a plan keeps its answer, `harness lock` drops it.
    matrix.write_text(MATRIX.replace('">=2.0"', '">=2.1"'))
    assert main(["plan", "-m", str(matrix)]) == 0
    assert "torch>=2.0 " in lock_path(matrix).read_text()
    assert main(["lock", "-m", str(matrix)]) == 0
    assert "torch>=2.0 " not in lock_path(matrix).read_text()
    assert "torch>=2.1 " in lock_path(matrix).read_text()
    capsys.readouterr()


def test_a_set_release_the_index_does_not_have_is_refused_in_one_line(
        matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-m", str(matrix), "--set", "torch=2.2.9"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()[-1:]
    assert line.endswith("--set torch=2.2.9: torch has no release 2.2.9 in the index (nearest: "
                         "2.2.2); nothing was built")
    assert "error" in captured.err and "Traceback" not in captured.err
    # Releases the index has and specifiers go through; offline with no folder nothing is
    # known to refuse it by.
    for value in ("2.1.2", "<2.2"):
        assert main(["plan", "-m", str(matrix), "--set", f"torch={value}"]) == 0
    assert main(["plan", "-m", str(matrix), "--offline", "--set", "torch=2.2.9"]) == 0

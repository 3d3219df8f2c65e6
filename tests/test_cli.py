"""The command line as a user meets it: fast start, one-line errors, output that pipes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.envs import inventory
from tests.conftest import DATA, ROOT, write_matrix

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def harness(*args: str, cwd: Path = ROOT, env: dict[str, str] = ENV
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=300)


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("plan", "--format", "json"),
                                  ("cases",)])
def test_commands_that_do_not_report_never_import_pandas(args: tuple[str, ...]) -> None:
    """pandas took 4-5 s of every start; only the report needs it."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", *args],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "pandas" not in imported and "ray" not in imported


def test_the_plan_table_keeps_parametrized_ids() -> None:
    proc = harness("plan", "-k", "mergekit_fp16::workaround")
    assert proc.returncode == 0, proc.stderr
    assert "workaround[float32]" in proc.stdout  # rich read "[float32]" as markup


def test_one_cell_is_said_in_the_singular() -> None:
    # It said "1 cells in 1 environments".
    proc = harness("plan", "-k", "mergekit_fp16::repro_merged",
                   "--only", "env=mergekit:torch=2.2.2")
    assert proc.stdout.endswith("\n1 cell in 1 environment\n"), proc.stdout


@pytest.mark.parametrize("command", ["plan", "plan --format json", "cases"])
def test_output_into_head_ends_quietly(command: str) -> None:
    proc = subprocess.run(f"{sys.executable} -m harness {command} | head -n 1", shell=True,
                          cwd=ROOT, env=ENV, capture_output=True, text=True, check=False,
                          timeout=300)
    assert proc.stdout.count("\n") == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", ["plan", "plan --format json", "cases", "doctor"])
def test_output_into_a_full_device_is_one_line(command: str) -> None:
    """It was an OSError traceback."""
    proc = subprocess.run(f"{sys.executable} -m harness {command} > /dev/full", shell=True,
                          cwd=ROOT, env=ENV, capture_output=True, text=True, check=False,
                          timeout=300)
    assert (proc.returncode, proc.stderr) == (
        2, "harness: error: cannot write output: No space left on device\n")


def test_an_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    proc = harness("--reports", str(tmp_path), "report", "no-such-run")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no run 'no-such-run'" in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("run", "--address", "auto"), "--address names a Ray cluster: add --executor ray"),
    (("run", "--resume", "latest", "--run-id", "x"), "give one"),
    (("run", "--run-id", "a/b"), "--run-id 'a/b': use up to 128 letters, digits"),
    (("run", "--run-id", "a" * 129), "use up to 128 letters"),
    # It was taken: `report latest` and `--resume latest` then meant the newest run, not it.
    (("run", "--run-id", "latest"), "--run-id latest: that name means the newest run"),
    (("run", "--retries", "-1"), "--retries must be 0 or more"),
    # Every count option is checked in one place, for every command that takes it.
    (("run", "-j", "0"), "--jobs must be at least 1"),
    (("bisect", "--axis", "probe", "-j", "0"), "--jobs must be at least 1"),
    (("history", "--last", "0"), "--last must be at least 1"),
    (("plan", "--max-cells", "0"), "--max-cells must be at least 1"),
])
def test_run_flags_that_do_not_fit_are_one_line(tmp_path: Path, args: tuple[str, ...],
                                                 message: str) -> None:
    proc = harness("--reports", str(tmp_path), *args, "-k", "nothing-matches-this")
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_collection_is_cached_until_a_case_file_changes(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.plan.cases import collect_cases

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\n")
    module = cases / "test_one.py"
    module.write_text("def test_a(): pass\n")
    assert [c.variant for c in collect_cases(cases)] == ["a"]
    assert len(list((tmp_path / "cache" / "collect").iterdir())) == 1
    module.write_text("def test_a(): pass\n\ndef test_b(): pass\n")
    assert [c.variant for c in collect_cases(cases)] == ["a", "b"]  # not the stale answer


@pytest.mark.parametrize("command", ["run", "merge"])
@pytest.mark.parametrize("reports", ["a-file", "/dev/null"])
def test_reports_naming_a_file_is_one_line(tmp_path: Path, command: str, reports: str) -> None:
    """It was a NotADirectoryError traceback (for run, after planning and probing)."""
    if reports == "a-file":
        reports = str(tmp_path / "a-file")
        Path(reports).write_text("")
    if command == "run":  # refused when the run folder is made, before any environment
        args = ["run", "-k", "mergekit_fp16::repro", "--hardware", "cpu", "--no-report"]
    else:  # a real run folder to merge, so that the merge gets to making its own
        run = tmp_path / "runs" / "one"
        run.mkdir(parents=True)
        (run / "run.json").write_text('{"run_id": "one", "created": 1.0}')
        args = ["merge", str(run), "--no-report"]
    proc = harness("--reports", reports, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"harness: error: --reports {reports}: cannot make a run "
                                  "folder there"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_zero_shards_is_refused() -> None:
    proc = harness("plan", "--format", "gha", "--shards", "0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "harness: error: --shards 0: must be at least 1"


@pytest.fixture(scope="module")
def one_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a small real run (host backend, one case) under its reports/."""
    tmp = tmp_path_factory.mktemp("one-run")
    write_matrix(tmp / "matrix.yaml", f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
                 "environments:\n  host: {backend: host, python: '@PY@'}\n")
    proc = harness("run", "-k", "test_behaviour.py::test_pass", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp


@pytest.mark.parametrize(("args", "said"), [
    (("report", "--out", "/dev/null"), "--out /dev/null: /dev/null is a file, not a folder"),
    (("report", "--out", "matrix.yaml/x"), "--out matrix.yaml/x: Not a directory"),
    (("report", "--status", "reports"), "--status reports: Is a directory"),
    (("report", "--status", "/proc/x"), "--status /proc/x: No such file or directory"),
    (("baseline", "-o", "reports"), "-o reports: Is a directory"),
    (("baseline", "-o", "matrix.yaml/x"), "-o matrix.yaml/x: Not a directory"),
    (("wheelhouse", "matrix.yaml"), "wheelhouse matrix.yaml: matrix.yaml is a file, not a"),
    (("wheelhouse", "w", "--base-packages", "reports"), "--base-packages reports: Is a dir"),
    (("envs", "build", "--into", "/dev/null"), "--into /dev/null: /dev/null is a file, not a"),
])
def test_an_output_path_that_cannot_be_written_is_one_line(one_run: Path, args: tuple[str, ...],
                                                          said: str) -> None:
    """Each was an OSError traceback (--status after the report was written)."""
    proc = harness(*args, cwd=one_run)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"harness: error: {said}"), proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("command", ["report", "baseline", "merge"])
def test_a_run_named_twice_is_refused(one_run: Path, command: str) -> None:
    """`report r11 r11` reported the run merged with itself, without a word."""
    run = next((one_run / "reports" / "runs").iterdir())
    proc = harness(command, run.name, str(run), cwd=one_run)  # by its id, then its folder
    assert (proc.returncode, proc.stderr) == (2, f"harness: error: {command}: a run is named "
                                                 "twice\n"), proc.stderr


def test_envs_list_as_json(tmp_path: Path) -> None:
    """--format json was taken and a table printed."""
    proc = harness("envs", "list", "--format", "json", cwd=tmp_path,
                   env={**ENV, "HARNESS_CACHE_DIR": str(tmp_path)})
    # What this machine holds (a Docker engine's images too), as the listing says it.
    listed = json.loads(json.dumps(inventory.listing(tmp_path)))
    assert (proc.returncode, json.loads(proc.stdout)) == (0, listed), proc.stderr


def test_doctor_finds_uv_where_environments_find_it(tmp_path: Path) -> None:
    """uv only beside the harness's Python (a venv's, not activated): doctor said "not
    found", though every environment was built with it."""
    from uv import find_uv_bin

    said = subprocess.run([find_uv_bin(), "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()
    proc = harness("doctor", env={**ENV, "PATH": str(tmp_path)})  # no uv on PATH
    assert f"uv:        {said}\n" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("value", ["200,000", "0", "abc"])
def test_a_cell_limit_variable_that_is_not_a_count_is_refused(value: str) -> None:
    """It was left out without a word: the default limit, and a refusal naming --max-cells."""
    proc = harness("plan", env={**ENV, "HARNESS_MAX_CELLS": value})
    assert proc.returncode == 2
    assert proc.stderr == (f"harness: error: HARNESS_MAX_CELLS={value!r}: expected a number "
                           "of cells, 1 or more\n")

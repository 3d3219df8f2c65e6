"""Under GitHub Actions: the step summary and the annotations for new failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import DATA, ROOT, write_matrix


def test_the_step_summary_and_annotations_name_what_changed_since_the_last_run(
        tmp_path: Path) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        "environments:\n  host: {backend: host, python: '@PY@'}\n"))
    summary = tmp_path / "summary.md"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GITHUB_ACTIONS": "true",
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_SERVER_URL": "https://github.com",
           "GITHUB_REPOSITORY": "org/repo", "GITHUB_RUN_ID": "42",
           "FLAKY_FLAG": str(tmp_path / "flag"), "HARNESS_PASS_ENV": "FLAKY_FLAG"}

    def run(run_id: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                               "run", "-m", str(m), "-k", "test_behaviour.py::test_[fp]*",
                               "--run-id", run_id], cwd=tmp_path, env=env,
                              capture_output=True, text=True, check=False, timeout=300)

    (tmp_path / "flag").write_text("x")  # the first night: flaky_once passes
    first = run("monday")
    assert first.returncode == 0 and "::error" not in first.stdout, first.stdout
    (tmp_path / "flag").unlink()  # the second night: it fails
    second = run("tuesday")
    assert second.returncode == 1
    assert ("::error title=New failure::host behaviour::flaky_once @cpu: PASS -> FAIL"
            in second.stdout.splitlines()), second.stdout
    text = summary.read_text()
    assert "### Compatibility matrix `tuesday`" in text
    assert "Since `monday`: 1 new failure, 0 fixed." in text
    assert "- host `behaviour::flaky_once` @cpu: PASS → FAIL" in text
    assert "https://github.com/org/repo/actions/runs/42" in text
    # A merge under CI publishes too, from the results it holds (not read back).
    merged = subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                             "merge", "tuesday", "--run-id", "nightly"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, check=False, timeout=300)
    assert merged.returncode == 1, merged.stdout + merged.stderr  # flaky_once: a new failure
    assert "### Compatibility matrix `nightly`" in summary.read_text(), summary.read_text()


def test_the_previous_run_is_the_newest_earlier_run_of_the_same_slice(tmp_path: Path) -> None:
    import json

    from harness.records.store import previous_run

    def run(name: str, created: float, keyword: str | None = None) -> Path:
        folder = tmp_path / "runs" / name
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({
            "created": created, "filters": {"only": [], "keyword": keyword, "hardware": []},
            "shard": None}))
        (folder / "results.jsonl").write_text("")
        return folder

    full1, sliced, full2 = run("a", 1.0), run("b", 2.0, keyword="mergekit"), run("c", 3.0)
    later = run("d", 4.0)
    assert previous_run(tmp_path, full2) == full1  # not the -k slice, not the later run
    assert previous_run(tmp_path, later) == full2
    assert previous_run(tmp_path, full1) is None and previous_run(tmp_path, sliced) is None

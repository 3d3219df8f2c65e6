"""Secrets: cells do not inherit them, and no file the harness writes holds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.core.redact import Redactor, passed, secret_values
from tests.conftest import DATA, ROOT, write_matrix

PLANTED = {"HF_TOKEN": "hf_plantedTOKENvalue123", "GITHUB_TOKEN": "ghp_plantedGITHUB456",
           "AWS_SECRET_ACCESS_KEY": "plantedAWSsecret789"}
MATRIX_KEY = "planted-matrix-api-key-0042"


def test_a_cell_inherits_the_allow_list_and_what_is_passed_by_name() -> None:
    environ = {"PATH": "/bin", "LANG": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda",
               "HF_TOKEN": "hf_x123456", "RANDOM_THING": "1", "MY_VAR": "v",
               "HARNESS_PASS_ENV": "MY_VAR, HF_*"}
    got = passed(environ)
    assert got == {"PATH": "/bin", "LANG": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda",
                   "MY_VAR": "v"}  # a secret passes only by its exact name
    assert "HF_TOKEN" in passed({**environ, "HARNESS_PASS_ENV": "HF_TOKEN"})


def test_secret_values_are_masked_everywhere_in_nested_data() -> None:
    redactor = Redactor(secret_values([("HF_TOKEN", "hf_abcdef"), ("DEBUG", "verbose"),
                                       ("API_KEY", "1")]))
    assert redactor.secrets == ("hf_abcdef",)  # not names that look harmless, not "1"
    assert redactor.obj({"a": ["x hf_abcdef y", ("hf_abcdef",)], "hf_abcdef": 3}) == {
        "a": ["x *** y", ("***",)], "***": 3}
    assert redactor.data(b"token=hf_abcdef") == b"token=***"


def test_a_planted_token_is_in_no_file_under_reports(tmp_path: Path) -> None:
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
        f"defaults: {{python: '{py}', timeout: 120, env: {{MY_API_KEY: {MATRIX_KEY}}}}}\n"
        "environments:\n  host: {backend: host}\n  venv: {backend: uv}\n"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), **PLANTED,
           "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           "run", "-m", str(m), "-k", "env_dump"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the case fails, on purpose
    rows = [json.loads(x) for x in next((tmp_path / "r" / "runs").iterdir()).joinpath(
        "results.jsonl").read_text().splitlines()]
    assert {r["environment"]: r["outcome"] for r in rows} == {"host": "FAIL", "venv": "FAIL"}
    for row in rows:
        seen = row["details"]["environ"]
        assert not set(PLANTED) & set(seen), row["environment"]  # never given to the cell
        assert seen["MY_API_KEY"] == "***"  # given (the matrix asked), masked when written
    secrets = [*PLANTED.values(), MATRIX_KEY]
    written = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    assert len(written) >= 8  # results, events, logs, envs, run.json, compat.*
    for path in written:
        text = path.read_bytes().decode(errors="replace")
        assert not any(s in text for s in secrets), path
    assert not any(s in proc.stdout + proc.stderr for s in secrets)

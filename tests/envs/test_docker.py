"""The Docker backend against a real Docker engine.

Skipped on a developer machine with no engine; under CI (``CI`` or ``HARNESS_REQUIRE_DOCKER``
set, as ``.ci/run`` does) a missing engine is a failure, so that these tests can never pass by
not running. ``.ci/run`` starts dockerd and bootstraps the base image; the fixture bootstraps
it too when it is missing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.envs import LaunchRequest
from harness.envs.docker import DockerBackend
from harness.envs.images import LABEL, bootstrap_base
from harness.matrix.load import load_matrix, parse_matrix
from harness.records.store import RunStore
from tests.conftest import DATA, ROOT, ctrl_c_reaches, report_dir, write_matrix

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def client() -> Any:
    try:
        import docker

        engine = docker.from_env(timeout=600)
        engine.ping()
    except Exception as exc:
        if os.environ.get("CI") or os.environ.get("HARNESS_REQUIRE_DOCKER"):
            pytest.fail(f"CI needs a Docker engine and none answers: {exc}")
        pytest.skip(f"no Docker engine answers here: {exc}")
    bootstrap_base(engine)  # a no-op when the image exists
    return engine


def ours(client: Any) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"{LABEL}=1"})


def harness(tmp_path: Path, *args: str, timeout: float = 1800,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           *args], cwd=tmp_path, capture_output=True, text=True, env=env,
                          check=False, timeout=timeout)


def newest_run(tmp_path: Path) -> Path:
    """The last run's folder: two runs of one second sort by their ids' random suffix."""
    return max((tmp_path / "r" / "runs").iterdir(), key=lambda p: p.stat().st_mtime_ns)


def results(tmp_path: Path) -> list[dict[str, Any]]:
    # Through the store: a line holds its fingerprint by reference (shared/<hash>.json).
    return [r.to_dict() for r in RunStore(newest_run(tmp_path)).attempts()]


BEHAVIOUR = f"""\
version: 1
cases_dir: {DATA / 'behaviour'}
defaults: {{python: "3.11", timeout: 15}}
environments:
  dock: {{backend: docker, hardware: [cpu], memory: 2g}}
"""


def test_crash_and_timeout_end_with_the_container_gone(tmp_path: Path, client: Any) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", BEHAVIOUR)
    proc = harness(tmp_path, "run", "-m", str(m), "-j", "2", "-k", "test_behaviour.py::test_[psh]*")
    got = {r["variant"]: r for r in results(tmp_path)}
    assert {k: v["outcome"] for k, v in got.items()} == {
        "pass": "PASS", "segfault": "CRASH", "hang": "TIMEOUT"}, proc.stdout + proc.stderr
    assert got["segfault"]["reason"] == "process killed by SIGSEGV"
    assert got["pass"]["fingerprint"]["python"].startswith("3.11")
    assert ours(client) == []


def test_ctrl_c_leaves_no_container(tmp_path: Path, client: Any) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", BEHAVIOUR.replace("timeout: 15", "timeout: 300"))
    harness(tmp_path, "run", "-m", str(m), "-k", "test_pass")  # the image exists before the test
    proc = subprocess.Popen([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                             "run", "-m", str(m), "-k", "test_hang"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=ctrl_c_reaches)
    deadline = time.monotonic() + 120
    while not ours(client) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ours(client), "the hanging case never started a container"
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    assert ours(client) == []


def test_device_request_passes_exactly_the_assigned_gpu(tmp_path: Path, client: Any) -> None:
    spec = parse_matrix(BEHAVIOUR.replace("hardware: [cpu]", "hardware: [sm_90]"),
                        file="matrix.yaml", base=tmp_path).environments[0]
    backend = DockerBackend(tmp_path / "cache")
    env = backend.realize(spec)
    request = LaunchRequest(argv=("-c", "pass"), env={"HARNESS_CELL_ID": "x"}, cwd=tmp_path,
                            log=tmp_path / "log", work_dir=tmp_path, cases_dir=DATA / "behaviour",
                            gpu=3, timeout=10, queue=tmp_path / "queue")
    (tmp_path / "queue").mkdir()
    container = backend.create(env, request)
    try:
        host = container.attrs["HostConfig"]
        (device,) = host["DeviceRequests"]
        assert device["DeviceIDs"] == ["3"] and device["Capabilities"] == [["gpu"]]
        assert "CUDA_VISIBLE_DEVICES=0" in container.attrs["Config"]["Env"]
        assert container.attrs["Config"]["NetworkDisabled"] is True
        assert host["Memory"] == 2 * 1024 ** 3
        mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
        assert mounts["/harness/cases"]["RW"] is False and mounts["/harness/run"]["RW"] is True
        # The claims a queue's processes share: where the harness has them, writable.
        assert mounts[str(tmp_path / "queue")]["RW"] is True
    finally:
        container.remove(force=True)


def test_the_cell_keeps_its_variables_when_the_host_exports_them_too(
        tmp_path: Path, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old backend dropped every variable whose value the host also had."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SECRET_OF_THE_HOST", "do-not-leak")
    spec = parse_matrix(BEHAVIOUR, file="matrix.yaml", base=tmp_path).environments[0]
    backend = DockerBackend(tmp_path / "cache")
    env = backend.realize(spec)
    request = LaunchRequest(argv=("-c", "pass"), cwd=tmp_path, log=tmp_path / "log",
                            env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "HF_HUB_OFFLINE": "1"},
                            work_dir=tmp_path, cases_dir=DATA / "behaviour", gpu=None,
                            timeout=10)
    container = backend.create(env, request)
    try:
        variables = container.attrs["Config"]["Env"]
        assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1" in variables
        assert "HF_HUB_OFFLINE=1" in variables
        assert not any(v.startswith("SECRET_OF_THE_HOST=") for v in variables)
    finally:
        container.remove(force=True)


def test_prune_keeps_the_images_the_matrix_uses(tmp_path: Path, client: Any) -> None:
    """The old prune compared the image tag's digest with the environment key: it removed
    every image, in use or not, and had no dry run."""
    m = write_matrix(tmp_path / "matrix.yaml", BEHAVIOUR)
    cache = {"HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    assert harness(tmp_path, "run", "-m", str(m), "-k", "test_pass", env=cache).returncode == 0
    tags = [t for image in client.images.list(filters={"label": "ml-compat-harness=1"})
            for t in image.tags]
    # The engine is shared: other tests' (and earlier runs') images are listed too; ours is
    # the one this matrix's environment names.
    digest = DockerBackend(tmp_path / "cache").listing_key(load_matrix(m).environments[0])
    (tag,) = [t for t in tags if t.endswith(f":{digest}")] or [None]
    assert tag is not None
    # Dry runs only: other tests' images live in the same engine.
    kept = harness(tmp_path, "envs", "prune", "-m", str(m), "--dry-run", env=cache)
    assert kept.returncode == 0 and tag not in kept.stdout, kept.stdout
    other = write_matrix(tmp_path / "other.yaml", BEHAVIOUR.replace('"3.11"', '"3.12"'))
    dry = harness(tmp_path, "envs", "prune", "-m", str(other), "--dry-run", env=cache)
    assert f"would remove dock ({tag})" in dry.stdout, dry.stdout
    assert client.images.get(tag)  # a dry run removes nothing


def test_a_container_that_cannot_start_is_an_error_not_a_crash(tmp_path: Path,
                                                                client: Any) -> None:
    """Docker refuses a 1 MB memory limit at create time: the machine, not the case, failed.
    The cell is retried, then reported as ERROR with Docker's words."""
    m = write_matrix(tmp_path / "matrix.yaml", BEHAVIOUR.replace("memory: 2g", "memory: 1m"))
    proc = harness(tmp_path, "run", "-m", str(m), "-k", "test_pass", "--retries", "1")
    lines = results(tmp_path)
    assert [(r["attempt"], r["outcome"], r["infra"]) for r in lines] == [
        (1, "ERROR", True), (2, "ERROR", True)], proc.stdout + proc.stderr
    assert "cannot create a container" in lines[-1]["reason"]
    assert "machine lost, retrying (attempt 2)" in proc.stderr
    assert ours(client) == []


MERGEKIT = """\
version: 1
cases_dir: {cases}
defaults: {{python: "3.11", timeout: 600, hardware: [cpu], cases: [mergekit_fp16]}}
environments:
  uv-torch2.0.1:
    backend: uv
    pins: {{torch: "2.0.1", transformers: "4.46.3", numpy: "<2"}}
  docker-torch2.0.1:
    backend: docker
    pins: {{torch: "2.0.1", transformers: "4.46.3", numpy: "<2"}}
"""


@pytest.mark.slow
def test_mergekit_in_a_container_matches_the_uv_environment(tmp_path: Path, client: Any) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", MERGEKIT.format(cases=ROOT / "cases"))
    first = harness(tmp_path, "run", "-m", str(m), "-j", "2")
    rows = results(tmp_path)
    by_backend: dict[str, dict[str, str]] = {"uv": {}, "docker": {}}
    for r in rows:
        by_backend[r["backend"]][r["variant"]] = r["outcome"]
    assert by_backend["docker"] == by_backend["uv"], first.stdout + first.stderr
    assert by_backend["docker"]["repro"] == "REPRODUCED"
    assert by_backend["docker"]["workaround[float32]"] == "PASS"
    assert by_backend["docker"]["workaround_cuda"] == "SKIP"
    table = (report_dir(tmp_path / "r") / "compat.md").read_text()
    assert "(`docker-torch2.0.1`)" in table and "(`uv-torch2.0.1`)" in table
    second = harness(tmp_path, "run", "-m", str(m), "-j", "2")
    assert "0 built, 2 reused (nothing to build)" in second.stdout, second.stdout
    assert ours(client) == []


def test_a_planted_token_is_in_no_file_under_reports(tmp_path: Path, client: Any) -> None:
    secret, key = "hf_plantedTOKENindocker1", "planted-docker-api-key-77"
    m = write_matrix(tmp_path / "matrix.yaml", BEHAVIOUR.replace(
        "memory: 2g", f"memory: 2g, env: {{MY_API_KEY: {key}}}"))
    proc = harness(tmp_path, "run", "-m", str(m), "-k", "env_dump", env={"HF_TOKEN": secret})
    (row,) = results(tmp_path)
    assert row["outcome"] == "FAIL", proc.stdout + proc.stderr
    assert "HF_TOKEN" not in row["details"]["environ"]
    assert row["details"]["environ"]["MY_API_KEY"] == "***"
    for path in (tmp_path / "r").rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode(errors="replace")
            assert secret not in text and key not in text, path


def test_a_container_past_its_memory_is_out_of_memory(tmp_path: Path, client: Any) -> None:
    m = write_matrix(tmp_path / "matrix.yaml", BEHAVIOUR.replace("memory: 2g", "memory: 256m"))
    proc = harness(tmp_path, "run", "-m", str(m), "-k", "test_behaviour.py::test_[ap]*")
    got = {r["variant"]: r for r in results(tmp_path)}
    assert got["allocate"]["outcome"] == "CRASH", proc.stdout + proc.stderr
    assert got["allocate"]["reason"] == "out of memory (memory: 256m)"
    assert got["pass"]["outcome"] == "PASS"  # its sibling went on
    assert ours(client) == []


def test_a_suite_runs_in_a_container_that_sees_its_folder(tmp_path: Path, client: Any) -> None:
    """The suite's folder is mounted read-only at its own path; the matrix's variables reach
    its conftest; the package under test is the image's own; each test is a result."""
    suite = tmp_path / "mysuite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "conftest.py").write_text(
        "import os\nassert os.environ.get('SUITE_VAR') == 'given', 'SUITE_VAR is not set'\n")
    (suite / "test_mod.py").write_text(
        "import pathlib\n\ndef test_ok():\n    assert pathlib.Path(__file__).exists()\n\n"
        "def test_fail():\n    assert 1 == 2, 'one is not two'\n")
    m = write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\nsuites:\n  mine: {{path: {suite}, package: pytest, "
        "env: {SUITE_VAR: given}}\ndefaults: {python: '3.11', timeout: 60}\n"
        "environments:\n  dock: {backend: docker, hardware: [cpu], memory: 2g, "
        "suites: [mine]}\n"))
    proc = harness(tmp_path, "run", "-m", str(m))
    rows = {r["variant"]: r for r in results(tmp_path)}
    assert rows["test_mod.py::test_ok"]["outcome"] == "PASS", proc.stdout + proc.stderr
    assert rows["test_mod.py::test_fail"]["outcome"] == "FAIL"
    assert "one is not two" in rows["test_mod.py::test_fail"]["reason"]
    session = rows["(session)"]
    (imported,) = session["details"]["suite"]["imported"]
    assert imported["installed"] and "site-packages" in imported["file"], imported
    assert session["backend"] == "docker" and session["reason"] == "1 failed, 1 passed"
    assert not ours(client)

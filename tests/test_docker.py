"""The Docker backend against a real Docker engine.

Skipped on a developer machine with no engine; under CI (``CI`` or ``HARNESS_REQUIRE_DOCKER``
set, as ``.ci/run`` does) a missing engine is a failure, so that these tests can never pass by
not running. ``.ci/run`` starts dockerd and bootstraps the base image; the fixture bootstraps
it too when it is missing.
"""

from __future__ import annotations

import json
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
from harness.images import LABEL, bootstrap_base
from harness.spec import parse_matrix
from tests.conftest import DATA, ROOT, write_matrix

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


def harness(tmp_path: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           *args], cwd=tmp_path, capture_output=True, text=True, env=env,
                          check=False, timeout=timeout)


def results(tmp_path: Path) -> list[dict[str, Any]]:
    runs = sorted((tmp_path / "r" / "runs").iterdir())
    return [json.loads(line) for line in (runs[-1] / "results.jsonl").read_text().splitlines()]


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
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
                            log=tmp_path / "log", run_dir=tmp_path, cases_dir=DATA / "behaviour",
                            gpu=3, timeout=10)
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
    finally:
        container.remove(force=True)


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
    table = (tmp_path / "r" / "compat.md").read_text()
    assert "docker-torch2.0.1 @cpu" in table and "uv-torch2.0.1 @cpu" in table
    second = harness(tmp_path, "run", "-m", str(m), "-j", "2")
    assert "0 built, 2 reused (nothing to build)" in second.stdout, second.stdout
    assert ours(client) == []

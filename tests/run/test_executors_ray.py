"""The Ray executor against a real three-node Ray cluster on this machine (loopback only).

Head: 2 CPUs and one logical sm_80 GPU; two workers: one logical sm_90 GPU each. The driver is
the real CLI (``harness run --executor ray --address ...``) in its own process.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, ROOT, record_lines, write_matrix

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'ml-compat-harness[ray]'")
from ray.cluster_utils import Cluster  # noqa: E402

LOOPBACK = "127.0.0.1"
pytestmark = pytest.mark.ray


def _matrix(path: Path, envs: int, hardware: str, timeout: float = 60) -> Path:
    lines = [f"  host{i}: {{backend: host, hardware: [{hardware}]}}" for i in range(1, envs + 1)]
    return write_matrix(path, f"version: 1\ncases_dir: {DATA / 'behaviour'}\n"
                              f"defaults: {{python: '@PY@', timeout: {timeout}}}\n"
                              "environments:\n" + "\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    scratch = tmp_path_factory.mktemp("ray")
    # Cells inherit the nodes' environment: where to log, and a cache of their own.
    os.environ["GPU_LOG"] = str(scratch / "gpu.jsonl")
    os.environ["HARNESS_PASS_ENV"] = "GPU_LOG HOLD_SECONDS"  # cells see only what is passed
    os.environ["HARNESS_CACHE_DIR"] = str(scratch / "node-cache")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # stay on the loopback
    common = {"node_ip_address": LOOPBACK, "object_store_memory": 80 * 1024 * 1024}
    made = Cluster(initialize_head=True, head_node_args={
        **common, "num_cpus": 2, "num_gpus": 1, "resources": {"sm_80": 1},
        "include_dashboard": False,
        # A dead node is noticed within seconds, not the default half minute.
        "_system_config": {"health_check_initial_delay_ms": 0,
                           "health_check_period_ms": 500,
                           "health_check_failure_threshold": 3}})
    workers = [made.add_node(**common, num_cpus=1, num_gpus=1, resources={"sm_90": 1})
               for _ in range(2)]
    made.wait_for_nodes()
    try:
        yield {"cluster": made, "head": made.head_node, "workers": workers,
               "address": made.address, "log": scratch / "gpu.jsonl", "common": common}
    finally:
        made.shutdown()
        for key in ("GPU_LOG", "HARNESS_CACHE_DIR", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
                    "HARNESS_PASS_ENV"):
            os.environ.pop(key, None)


def _harness(tmp_path: Path, *args: str, **popen: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"),
                           *args], cwd=tmp_path, capture_output=True, text=True, env=env,
                          check=False, timeout=600, **popen)


def _lines(run_dir: Path) -> list[dict[str, Any]]:
    return record_lines(run_dir)


def _table(run_dir: Path) -> dict[tuple[str, str, str], str]:
    final: dict[str, dict[str, Any]] = {}
    for row in _lines(run_dir):
        final[row["cell_id"]] = row
    return {(r["environment"], f"{r['case_id']}::{r['variant']}", r["hardware_target"]):
            r["outcome"] for r in final.values()}


def test_cells_land_on_their_architecture_and_the_table_equals_the_local_one(
        tmp_path: Path, cluster: dict[str, Any]) -> None:
    log: Path = cluster["log"]
    log.unlink(missing_ok=True)
    m = _matrix(tmp_path / "matrix.yaml", envs=2, hardware="cpu, sm_90, sm_80")
    # pass, reproduces, other_error, os_exit, gpu_log (not gpu_hold)
    k = "test_behaviour.py::test_[prog]*[!d]"
    ray_run = _harness(tmp_path, "run", "-m", str(m), "-k", k, "--executor", "ray",
                       "--address", cluster["address"], "--run-id", "on-ray")
    assert ray_run.returncode == 1, ray_run.stdout + ray_run.stderr  # FAIL and CRASH are in it
    run_dir = tmp_path / "r" / "runs" / "on-ray"
    rows = _lines(run_dir)
    assert len(rows) == len({r["cell_id"] for r in rows}) == 2 * 5 * 3  # nothing twice

    # Every cell on a node of its kind: sm_90 on the workers, sm_80 on the head.
    sm90 = {w.node_id for w in cluster["workers"]}
    head = cluster["head"].node_id
    for row in rows:
        if row["hardware_target"] == "sm_90":
            assert row["node"] in sm90, row
        elif row["hardware_target"] == "sm_80":
            assert row["node"] == head, row
        else:
            assert row["gpu"] is None
    assert {r["node"] for r in rows if r["hardware_target"] == "sm_90"} == sm90  # both used

    # No GPU ever ran two cells at once (the cases logged what they were given, and when).
    spans: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    logged = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(logged) == 2 * 3
    for entry in logged:
        if entry["hardware"] != "cpu":
            spans[(entry["node"], entry["gpu"])].append((entry["start"], entry["end"]))
    for each in spans.values():
        each.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(each))

    # The record names the executor and its nodes; the same matrix run locally agrees.
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["executor"]["executor"] == "ray" and len(meta["executor"]["nodes"]) == 3
    local = _harness(tmp_path, "run", "-m", str(m), "-k", k, "--run-id", "local",
                     "--gpus", "0:sm_90,1:sm_80", "-j", "2")
    assert local.returncode == 1, local.stdout + local.stderr
    assert _table(tmp_path / "r" / "runs" / "local") == _table(run_dir)
    assert Counter(_table(run_dir).values()) == {"PASS": 12, "REPRODUCED": 6, "FAIL": 6,
                                                 "CRASH": 6}


def test_a_node_killed_mid_cell_loses_and_duplicates_nothing(
        tmp_path: Path, cluster: dict[str, Any]) -> None:
    log: Path = cluster["log"]
    log.unlink(missing_ok=True)
    m = _matrix(tmp_path / "matrix.yaml", envs=4, hardware="sm_90")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOLD_SECONDS": "4"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "r"), "run", "-m", str(m),
         "-k", "gpu_hold", "--executor", "ray", "--address", cluster["address"],
         "--run-id", "kill"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    victim = cluster["workers"][0]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        started = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        if any(e["event"] == "start" and e["node"] == victim.node_id for e in started):
            break
        time.sleep(0.1)
    else:
        driver.kill()
        pytest.fail("no cell started on the node to be killed")
    cluster["cluster"].remove_node(victim, allow_graceful=False)
    out, err = driver.communicate(timeout=300)
    # A replacement, for the tests that come after this one.
    cluster["workers"][0] = cluster["cluster"].add_node(
        **cluster["common"], num_cpus=1, num_gpus=1, resources={"sm_90": 1})
    assert driver.returncode == 0, out + err

    rows = _lines(tmp_path / "r" / "runs" / "kill")
    final = [r for r in rows if not r["infra"]]
    lost = [r for r in rows if r["infra"]]
    assert len(final) == len({r["cell_id"] for r in final}) == 4  # each cell once
    assert all(r["outcome"] == "PASS" for r in final)
    assert lost and all(r["outcome"] == "ERROR" and "Ray lost the cell's task" in r["reason"]
                        for r in lost), lost
    retried = {r["cell_id"] for r in lost}
    assert all(r["attempt"] == 2 for r in final if r["cell_id"] in retried)
    assert all(r["node"] != victim.node_id for r in final)
    assert "machine lost, retrying (attempt 2)" in err

"""failures.md §3's ``te_ln_mlp`` for real, with no GPU: llm-foundry from PyPI with a real
TransformerEngine whose torch extension is built here (Debian's CUDA 12 toolkit, one
architecture). 0.6.0 must fail while binding ``build_ffn``'s arguments (``bias`` given twice),
after TE has imported; 0.8.0, where that is fixed, must get past the binding to
``te.LayerNormMLP`` and SKIP there in words (it needs CUDA), never PASS. TE's torch extension is
compiled as a GPU runner would get it: by ``harness envs build --into DIR`` first, each wheel
under its key; the run installs those wheels and compiles nothing.

Slow: the toolkit (1.7 GB of Debian packages) and two builds of TE 1.13's torch extension,
one against each environment's torch (about 8 minutes each on two cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.results import Outcome
from harness.records.store import RunStore
from tests.conftest import ROOT, report_line
from tests.envs.test_wheelkey import compiler_shims

pytestmark = pytest.mark.slow


def test_te_ln_mlp_reproduces_on_0_6_and_gets_past_the_binding_on_0_8(tmp_path: Path) -> None:
    cache = os.environ.get("HARNESS_TEST_CACHE") or str(tmp_path / "cache")
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "harness", "envs", "build", "--into", str(wheels), "--env",
         "llmfoundry-cpu:*"], cwd=ROOT, capture_output=True, text=True, timeout=4800,
        check=False, env={**os.environ, "HARNESS_CACHE_DIR": cache})
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    report_line(built.stdout.strip().splitlines()[-1])
    keys = {e.parent.name for e in wheels.glob("transformer-engine-torch-1.13.0-*/*.whl")}
    assert len(keys) == 2  # one against each environment's torch
    # The run stands for a GPU runner: a cache of its own, every compiler watched.
    runner, log = tmp_path / "runner", tmp_path / "compilers.log"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "reports"), "run",
         "--only", "env=llmfoundry-cpu:*", "--hardware", "cpu", "--jobs", "1",
         "--find-links", str(wheels)],
        cwd=ROOT, capture_output=True, text=True, timeout=4800, check=False,
        env={**os.environ, "HARNESS_CACHE_DIR": str(runner),
             **compiler_shims(tmp_path / "shims", log)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "building here" not in proc.stderr, proc.stderr[-2000:]
    assert not log.exists() and not (runner / "toolkits").exists()  # no compiler, no toolkit
    results = {r.environment.split(",")[0]: r
               for r in RunStore.open(tmp_path / "reports", "latest").results()}
    for name, result in sorted(results.items()):  # in CI's log, not only in the asserts
        report_line(f"llmfoundry_fp8::{result.variant} @cpu, {name}: {result.outcome} "
                    f"{result.reason}"[:400])
    fails = results["llmfoundry-cpu:llm_foundry=0.6.0"]
    fixed = results["llmfoundry-cpu:llm_foundry=0.8.0"]
    assert fails.outcome is Outcome.REPRODUCED, fails.reason
    assert fails.signature == "mpt-te-ln-mlp-bias-twice"
    assert "build_ffn() got multiple values for keyword argument 'bias'" in fails.reason
    assert fixed.outcome is Outcome.SKIP, fixed.reason
    assert "build_ffn's arguments bound" in fixed.reason
    assert "te.LayerNormMLP" in fixed.reason and "TransformerEngine needs CUDA" in fixed.reason
    for result in (fails, fixed):  # real TE, built here and imported, not a stand-in
        assert result.details["transformer_engine"].startswith("1.13.0 ("), result.details
        assert "site-packages/transformer_engine" in result.details["transformer_engine"]
        assert "transformer-engine[pytorch]==1.13.0" in result.fingerprint["requirements"]
        took = [line for line in result.fingerprint["provenance"]
                if line.startswith("transformer-engine-torch 1.13.0 from the wheel folder")]
        assert len(took) == 1 and took[0].split("(key ")[1].rstrip(")") in keys, result

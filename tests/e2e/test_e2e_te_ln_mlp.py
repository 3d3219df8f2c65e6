"""failures.md §3's ``te_ln_mlp`` for real, with no GPU: llm-foundry from PyPI with a real
TransformerEngine whose torch extension is built here (Debian's CUDA 12 toolkit, one
architecture). 0.6.0 must fail while binding ``build_ffn``'s arguments (``bias`` given twice),
after TE has imported; 0.8.0, where that is fixed, must get past the binding to
``te.LayerNormMLP`` and SKIP there in words (it needs CUDA), never PASS.

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

pytestmark = pytest.mark.slow


def test_te_ln_mlp_reproduces_on_0_6_and_gets_past_the_binding_on_0_8(tmp_path: Path) -> None:
    cache = os.environ.get("HARNESS_TEST_CACHE") or str(tmp_path / "cache")
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "reports"), "run",
         "--only", "env=llmfoundry-cpu:*", "--hardware", "cpu", "--jobs", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=4800, check=False,
        env={**os.environ, "HARNESS_CACHE_DIR": cache})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
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

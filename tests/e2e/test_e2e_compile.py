"""failures.md §2 for real, with no GPU: the ktransformers v0.2.4 flashinfer fork (from a
local wheelhouse, as a runner without GitHub would get it) JIT-compiles its batch MLA module
with nvcc. "fa3" must fail with the fork's MLAPlan / ``float *`` errors, "fa2" must compile.

Slow: torch 2.6.0 (CUDA 12.4 build) from PyPI, then two nvcc builds (about 1 and 4 minutes on
two cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.results import Outcome
from harness.records.store import RunStore
from tests.conftest import ROOT, WHEELHOUSE, needs_wheelhouse, report_line

pytestmark = [pytest.mark.slow, needs_wheelhouse]


def test_fa3_mla_build_reproduces_and_fa2_compiles(tmp_path: Path) -> None:
    cache = os.environ.get("HARNESS_TEST_CACHE") or str(tmp_path / "cache")
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--reports", str(tmp_path / "reports"), "run",
         "--only", "env=ktransformers-*", "--hardware", "cpu", "-k", "compile",
         "--find-links", str(WHEELHOUSE), "--jobs", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=3000, check=False,
        env={**os.environ, "HARNESS_CACHE_DIR": cache})
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {r.variant: r for r in RunStore.open(tmp_path / "reports", "latest").results()}
    for variant, result in sorted(results.items()):  # in CI's log, not only in the asserts
        report_line(f"ktransformers_flashinfer::{variant} @cpu: {result.outcome} "
                    f"({result.duration:.0f} s) {result.reason.rsplit(' ... ', 1)[-1]}")
    assert set(results) == {"compile[fa3]", "compile[fa2]"}
    fa3, fa2 = results["compile[fa3]"], results["compile[fa2]"]
    assert (fa2.outcome, fa2.reason) == (Outcome.PASS, "")
    assert fa3.outcome is Outcome.REPRODUCED and fa3.signature == "flashinfer-fa3-mla-build"
    assert "batch_mla_sm90_" in fa3.reason
    assert ('"MLAPlan"' in fa3.reason) or ('entity of type "float *"' in fa3.reason)
    # The swap is on record: the fork came from the wheelhouse, not from GitHub.
    assert any(r.endswith("/flashinfer_python-0.2.3-py3-none-any.whl")
               for r in fa3.fingerprint["requirements"])

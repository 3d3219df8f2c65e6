"""ktransformers v0.2.4 on Hopper: the flashinfer fork's "fa3" MLA kernels fail to JIT-compile.

Upstream: kvcache-ai/ktransformers#1176 #1205; fixes PR #1220 (force ``backend="fa2"``) and
PR #1244 (submodule update), both first in v0.3.1. Read against flashinfer 0.2.3
(``flashinfer/mla.py``, ``flashinfer/jit/attention/pytorch.py``), which the fork is based on.
Mechanism: the fork (kvcache-ai/custom_flashinfer @ fd94393) changed ``MLAPlan(...)`` and made
``MLAParams::partial_o`` a ``float*`` but updated only the "fa2" sources; "auto" picks "fa3" on
compute capability 9.x with CUDA >= 12.3, whose ``batch_mla_sm90_*.cu`` no longer compile.
Each variant gets its own flashinfer JIT cache (``$HOME/.cache/flashinfer``), so nothing built
by one variant is reused by the next. Each compile takes minutes.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from harness_case import Case, Signature, requires

# torch.utils.cpp_extension puts the compiler's output into the exception's message.
FA3_MLA_BUILD = Signature(
    "flashinfer-fa3-mla-build", "RuntimeError",
    r"Error building extension[\s\S]*(cannot be assigned to an entity of type \"float \*\""
    r"|MLAPlan)")

CASE = Case(
    failure="ktransformers v0.2.4 on Hopper: the flashinfer fork's fa3 MLA kernels do not compile",
    upstream=(
        "kvcache-ai/ktransformers#1176",
        "kvcache-ai/ktransformers#1205",
        "kvcache-ai/ktransformers#1220",
        "kvcache-ai/ktransformers#1244",
    ),
    about=("flashinfer-python",),
)

NEEDS_FORK = requires(packages={"flashinfer-python": "", "torch": ""}, executables=("ninja",))
NEEDS_NVCC = requires(nvcc=">=12.3")
HOPPER = requires(cuda=True, cc=">=9.0,<10", cc_why="needs a Hopper GPU (compute capability 9.x)")
BACKENDS = [pytest.param("fa3", marks=FA3_MLA_BUILD.reproduces, id="fa3"),
            pytest.param("fa2", id="fa2")]
HEAD_DIM_CKV, HEAD_DIM_KPE, NUM_HEADS = 512, 64, 128  # DeepSeek-V3's MLA shape


@pytest.fixture
def fresh_jit_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """flashinfer fixes its JIT workspace from ``$HOME`` at import time: point it at tmp."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    env = sys.modules.get("flashinfer.jit.env")
    if env is not None:  # imported by an earlier variant: its workspace is fixed, so empty it
        shutil.rmtree(env.FLASHINFER_WORKSPACE_DIR, ignore_errors=True)
        return Path(env.FLASHINFER_WORKSPACE_DIR)
    return tmp_path / ".cache" / "flashinfer"


@NEEDS_FORK
@NEEDS_NVCC
@pytest.mark.parametrize("backend", BACKENDS)
def test_compile(backend: str, fresh_jit_cache: Path, harness_record: Any) -> None:
    """(A) No GPU needed: generate and build the batch MLA module for the backend (bf16)."""
    import torch
    from flashinfer.jit import gen_batch_mla_module

    gen_batch_mla_module(backend, torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32,
                         HEAD_DIM_CKV, HEAD_DIM_KPE, False)
    harness_record("jit_cache", str(fresh_jit_cache))


@NEEDS_FORK
@NEEDS_NVCC
@HOPPER
@pytest.mark.parametrize("backend", [pytest.param("auto", marks=FA3_MLA_BUILD.reproduces,
                                                  id="auto"),
                                     pytest.param("fa2", id="fa2")])
def test_end_to_end(backend: str, fresh_jit_cache: Path, harness_record: Any) -> None:
    """(B) On cc 9.x: ``BatchMLAPagedAttentionWrapper`` + ``plan`` + ``run``, as ktransformers."""
    import torch
    from flashinfer.mla import BatchMLAPagedAttentionWrapper

    batch, kv_len, page_size = 2, 64, 1
    device = torch.device("cuda")
    wrapper = BatchMLAPagedAttentionWrapper(
        torch.empty(128 * 1024 * 1024, dtype=torch.int8, device=device), backend=backend)
    harness_record("chosen_backend", wrapper._backend)
    pages = batch * kv_len // page_size
    # The fork's plan() takes a required bsz_tensor (an int32 tensor holding the batch size)
    # that upstream flashinfer 0.2.3 does not have; ktransformers passes it.
    wrapper.plan(
        qo_indptr=torch.arange(batch + 1, dtype=torch.int32, device=device),
        kv_indptr=torch.arange(0, pages + 1, kv_len // page_size, dtype=torch.int32,
                               device=device),
        kv_indices=torch.arange(pages, dtype=torch.int32, device=device),
        kv_len_arr=torch.full((batch,), kv_len, dtype=torch.int32, device=device),
        num_heads=NUM_HEADS, head_dim_ckv=HEAD_DIM_CKV, head_dim_kpe=HEAD_DIM_KPE,
        page_size=page_size, causal=False, sm_scale=1.0 / (192 ** 0.5),
        q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16,
        bsz_tensor=torch.tensor([batch], dtype=torch.int32, device=device))
    q_nope = torch.randn(batch, NUM_HEADS, HEAD_DIM_CKV, dtype=torch.bfloat16, device=device)
    q_pe = torch.randn(batch, NUM_HEADS, HEAD_DIM_KPE, dtype=torch.bfloat16, device=device)
    ckv = torch.randn(pages, page_size, HEAD_DIM_CKV, dtype=torch.bfloat16, device=device)
    kpe = torch.randn(pages, page_size, HEAD_DIM_KPE, dtype=torch.bfloat16, device=device)
    out = wrapper.run(q_nope, q_pe, ckv, kpe)
    assert out.shape == q_nope.shape and torch.isfinite(out.float()).all()

"""Capability probes: the facts that explain a compatibility table.

Does torch talk to this numpy; which dtypes have a matmul on each device; is fused
scaled-dot-product attention there; on a GPU: FP8 (torch's ``_scaled_mm`` and TE's own check)
against the compute capability, bf16, and which attention kernels run. Each probe is PASS or
FAIL on its own; the numpy bridge declares the known torch-built-for-numpy-1 failure so that
it reads as REPRODUCED.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness_case import Signature, requires

NUMPY2_ABI = Signature("numpy-abi", "RuntimeError", r"Numpy is not available")
# The same missing CPU Half kernel as failures.md §4, seen at the level of one GEMM.
ADDMM_HALF = Signature(
    "addmm-half-cpu", "RuntimeError", r"\"addmm_impl_cpu_\" not implemented for 'Half'"
)
CUDA = requires(cuda=True)
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=CUDA)]


@requires(packages={"torch": "", "numpy": ""})
@NUMPY2_ABI.reproduces
def test_numpy_bridge() -> None:
    """torch.from_numpy / .numpy(): torch built against numpy 1.x fails under numpy 2."""
    import numpy as np
    import torch

    tensor = torch.from_numpy(np.arange(6, dtype=np.float32))
    assert tensor.sum().item() == 15.0
    assert tensor.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


@requires(packages={"torch": ""})
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@ADDMM_HALF.reproduces
def test_matmul(device: str, dtype: str) -> None:
    """A plain GEMM in the dtype on the device: the capability case §4 depends on."""
    import torch

    a = torch.randn(16, 16, device=device).to(getattr(torch, dtype))
    out = torch.nn.functional.linear(a, a, a[0])
    assert out.dtype == getattr(torch, dtype)
    assert torch.allclose(out.float(), (a.float() @ a.float().T + a[0].float()),
                          atol=0.5, rtol=0.05)


@requires(packages={"torch": ">=2.0"})
@pytest.mark.parametrize("device", DEVICES)
def test_sdpa(device: str) -> None:
    """torch.nn.functional.scaled_dot_product_attention runs (fused attention available)."""
    import torch

    q = torch.randn(1, 2, 8, 16, device=device)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out.shape == q.shape and torch.isfinite(out).all()


# ------------------------------------------------------------------ GPU capability probes

# torch's own refusal, e.g. "torch._scaled_mm is only supported on CUDA devices with compute
# capability >= 9.0 or 8.9, or ROCm MI300+" (the wording varies across releases).
SCALED_MM_UNSUPPORTED = Signature(
    "scaled-mm-unsupported", "RuntimeError",
    r"_scaled_mm is only supported on .*compute capability|Multiplication of two Float8_e4m3fn "
    r"matrices is only supported|torch\._scaled_mm is only supported")
TE_FP8_UNSUPPORTED = Signature(
    "te-fp8-unsupported", "AssertionError",
    r"compute capability 8\.9 or higher required for FP8|required for FP8 execution")


@requires(cuda=True, packages={"torch": ">=2.1"})
@SCALED_MM_UNSUPPORTED.reproduces
def test_fp8_scaled_mm(harness_record: Any) -> None:
    """torch's FP8 GEMM (``torch._scaled_mm``, e4m3): available from compute capability 8.9."""
    import torch

    harness_record("compute_capability", ".".join(map(str, torch.cuda.get_device_capability())))
    a = torch.randn(32, 32, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(32, 32, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")
    out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    result = out[0] if isinstance(out, tuple) else out  # torch < 2.5 also returned the amax
    assert result.shape == (32, 32) and torch.isfinite(result.float()).all()


#: TE's FP8 verdict by release: public from 1.0 (``check_fp8_support``), private before
#: (``_check_fp8_support`` in v0.10-v0.12's ``transformer_engine/pytorch/fp8.py``).
TE_FP8_CHECKS = ("check_fp8_support", "_check_fp8_support")


def fp8_check_of(fp8_module: Any) -> tuple[str, Any]:
    """The FP8 support check this TE release has, by name; SKIP in words if it has none."""
    for name in TE_FP8_CHECKS:
        if callable(getattr(fp8_module, name, None)):
            return name, getattr(fp8_module, name)
    pytest.skip("needs TransformerEngine's FP8 support check; this release has none of "
                + ", ".join(TE_FP8_CHECKS))


@requires(cuda=True, packages={"transformer-engine": ""})
@TE_FP8_UNSUPPORTED.reproduces
def test_fp8_transformer_engine(harness_record: Any) -> None:
    """TransformerEngine's own verdict, the check ``fp8_autocast`` runs."""
    from transformer_engine.pytorch import fp8

    name, check = fp8_check_of(fp8)
    harness_record("te_check", name)
    available, reason = check()
    harness_record("fp8_available", available)
    harness_record("reason", reason)
    assert available, reason


@requires(cuda=True)
def test_bf16_cuda(harness_record: Any) -> None:
    """bf16 on the GPU: torch's own answer, then a real bf16 GEMM (native from sm_80)."""
    import torch

    native = torch.cuda.is_bf16_supported()
    harness_record("is_bf16_supported", native)
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    assert torch.isfinite((a @ a).float()).all()
    assert native, "torch.cuda.is_bf16_supported() is False on this GPU"


SDPA_BACKENDS = ["flash", "efficient", "math"]


@requires(cuda=True, packages={"torch": ">=2.0"})
@pytest.mark.parametrize("backend", SDPA_BACKENDS)
def test_attention_backend(backend: str, harness_record: Any) -> None:
    """Which fused SDPA kernels this torch build has for this GPU: one backend allowed at a time."""
    import torch

    q = torch.randn(1, 4, 128, 64, device="cuda", dtype=torch.float16)
    with _only_sdpa_backend(backend):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    harness_record("compute_capability", ".".join(map(str, torch.cuda.get_device_capability())))
    assert torch.isfinite(out.float()).all()


def _only_sdpa_backend(backend: str) -> Any:
    import torch

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3 has only the older context manager
        flags = {f"enable_{'mem_efficient' if name == 'efficient' else name}": name == backend
                 for name in SDPA_BACKENDS}
        return torch.backends.cuda.sdp_kernel(**flags)
    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH,
                        "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend])


@requires(cuda=True, packages={"flash-attn": ""})
def test_flash_attn_package(harness_record: Any) -> None:
    """The flash-attn package's kernel (not torch's copy) runs on this GPU and torch build.

    2.x has ``flash_attn_func`` on padded (batch, seq, heads, dim) tensors; 1.x has only the
    varlen ``flash_attn_unpadded_func`` on packed tokens with cumulative sequence lengths."""
    import torch

    batch, seq, heads, dim = 1, 128, 4, 64
    q = torch.randn(batch, seq, heads, dim, device="cuda", dtype=torch.float16)
    api, attention = flash_attn_api()
    harness_record("api", api)
    if api == "flash_attn_func":
        out = attention(q, q, q, causal=True)
    else:
        packed = q.reshape(batch * seq, heads, dim)
        cu_seqlens = torch.arange(0, (batch + 1) * seq, seq, device="cuda", dtype=torch.int32)
        out = attention(packed, packed, packed, cu_seqlens, cu_seqlens, seq, seq, 0.0,
                        causal=True)
    assert torch.isfinite(out.float()).all()


def flash_attn_api() -> tuple[str, Any]:
    try:
        from flash_attn import flash_attn_func
    except ImportError:  # flash-attn 1.x
        from flash_attn.flash_attn_interface import flash_attn_unpadded_func

        return "flash_attn_unpadded_func", flash_attn_unpadded_func
    return "flash_attn_func", flash_attn_func

"""Capability probes: the facts that explain a compatibility table.

Does torch talk to this numpy; which dtypes have a matmul on each device; is fused
scaled-dot-product attention there. Each probe is PASS or FAIL on its own; the numpy bridge
declares the known torch-built-for-numpy-1 failure so that it reads as REPRODUCED.
"""

from __future__ import annotations

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

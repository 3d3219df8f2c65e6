"""mergekit + Llama on the CPU in float16: "addmm_impl_cpu_" not implemented for 'Half'.

Upstream: arcee-ai/mergekit#175 (not a mergekit bug), huggingface/transformers#27769,
bigscience-workshop/petals#432; fp16 GEMM on the CPU arrived with pytorch/pytorch#99498.
Mechanism: a model loaded with ``torch_dtype=torch.float16`` and no device stays on the CPU,
where older torch's addmm has no Half kernel; the first ``nn.Linear`` (q_proj) raises.
Heavy imports live inside the tests so that the harness can collect cases without torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness_case import Signature, requires

ADDMM_HALF = Signature(
    "addmm-half-cpu", "RuntimeError", r"\"addmm_impl_cpu_\" not implemented for 'Half'"
)
NEEDS_TRANSFORMERS = requires(packages={"transformers": ">=4.31"})


def _tiny_llama(path: Path, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                         num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2)
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def _load_and_forward(path: Path, dtype_name: str, device: str | None = None) -> Any:
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(path, torch_dtype=getattr(torch, dtype_name))
    if device is not None:
        model = model.to(device)
    ids = torch.randint(0, 128, (1, 8), device=model.device)
    with torch.no_grad():
        return model(ids).logits


@NEEDS_TRANSFORMERS
@ADDMM_HALF.reproduces
def test_repro(tmp_path: Path, harness_record: Any) -> None:
    """The reporter's load: float16, no device, so the model runs on the CPU."""
    logits = _load_and_forward(_tiny_llama(tmp_path / "model"), "float16")
    harness_record("device", str(logits.device))
    assert logits.dtype.is_floating_point


@NEEDS_TRANSFORMERS
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_workaround(tmp_path: Path, dtype: str) -> None:
    """Documented fix on the CPU: load in bfloat16 or float32 instead."""
    import torch

    logits = _load_and_forward(_tiny_llama(tmp_path / "model"), dtype)
    assert torch.isfinite(logits.float()).all()


@NEEDS_TRANSFORMERS
@requires(cuda=True)
def test_workaround_cuda(tmp_path: Path) -> None:
    """Documented fix with a GPU: float16 is fine once the model is on CUDA."""
    import torch

    logits = _load_and_forward(_tiny_llama(tmp_path / "model"), "float16", device="cuda")
    assert logits.is_cuda and torch.isfinite(logits.float()).all()

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
import tinymodels
from harness_case import Case, Signature, requires

ADDMM_HALF = Signature(
    "addmm-half-cpu", "RuntimeError", r"\"addmm_impl_cpu_\" not implemented for 'Half'"
)
NEEDS_TRANSFORMERS = requires(packages={"transformers": ">=4.31"})

CASE = Case(
    failure='"addmm_impl_cpu_" not implemented for \'Half\': a float16 model left on the CPU',
    upstream=(
        "arcee-ai/mergekit#175",
        "huggingface/transformers#27769",
        "bigscience-workshop/petals#432",
        "pytorch/pytorch#99498",
    ),
    about=("torch",),
)


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
    logits = _load_and_forward(tinymodels.save_llama(tmp_path / "model"), "float16")
    harness_record("device", str(logits.device))
    assert logits.dtype.is_floating_point


@NEEDS_TRANSFORMERS
@requires(packages={"mergekit": ""})
@ADDMM_HALF.reproduces
def test_repro_merged(tmp_path: Path, harness_record: Any) -> None:
    """The reporter's whole flow: dare_ties-merge three Llamas with mergekit, load in fp16."""
    merged = _dare_ties_merge(tmp_path)
    harness_record("merged_files", sorted(p.name for p in merged.iterdir()))
    logits = _load_and_forward(merged, "float16")
    harness_record("device", str(logits.device))
    assert logits.dtype.is_floating_point


def _dare_ties_merge(root: Path) -> Path:
    """mergekit's own entry point (``run_merge``), on the CPU, as ``mergekit-yaml`` calls it."""
    from mergekit.config import MergeConfiguration
    from mergekit.merge import MergeOptions, run_merge

    base, *tuned = tinymodels.save_perturbed_llamas(root, 3)
    config = MergeConfiguration.model_validate({
        "merge_method": "dare_ties",
        "base_model": str(base),
        "models": [{"model": str(p), "parameters": {"density": 0.5, "weight": 0.5}}
                   for p in tuned],
        "parameters": {"int8_mask": True},
        "dtype": "float16",
    })
    out = root / "merged"
    run_merge(config, str(out), options=MergeOptions(cuda=False, copy_tokenizer=False,
                                                     random_seed=0, lazy_unpickle=False))
    return out


@NEEDS_TRANSFORMERS
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_workaround(tmp_path: Path, dtype: str) -> None:
    """Documented fix on the CPU: load in bfloat16 or float32 instead."""
    import torch

    logits = _load_and_forward(tinymodels.save_llama(tmp_path / "model"), dtype)
    assert torch.isfinite(logits.float()).all()


@NEEDS_TRANSFORMERS
@requires(cuda=True)
def test_workaround_cuda(tmp_path: Path) -> None:
    """Documented fix with a GPU: float16 is fine once the model is on CUDA."""
    import torch

    logits = _load_and_forward(tinymodels.save_llama(tmp_path / "model"), "float16", device="cuda")
    assert logits.is_cuda and torch.isfinite(logits.float()).all()

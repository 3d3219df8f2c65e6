"""TransformerLens: Llama weights, ``fold_value_biases`` mixes CUDA and CPU tensors.

Upstream: TransformerLensOrg/TransformerLens#517 (and #371, PR #461, fix PR #489). Read against
1.12.1, 1.13.0 and 1.14.0 (``loading_from_pretrained.convert_llama_weights``,
``HookedTransformer.fold_value_biases``).
Mechanism: ``fold_value_biases`` computes ``b_O + (b_V[:, :, None] * W_O).sum([0, 1])``. In
<= 1.12.1 the zero biases are made on the CPU, so an HF model already on CUDA fails; 1.13.0
makes them on ``cfg.device`` but leaves ``W_O`` where the HF model is, so an HF model on the CPU
fails; 1.14.0 moves ``W_O`` too. On a CPU-only machine every tensor is on the CPU: it cannot
fail there, so every variant needs a GPU. ``from_pretrained`` cannot run offline for Llama
names, so the cases call the same conversion on a tiny Llama, as ``from_pretrained`` does.
"""

from __future__ import annotations

from typing import Any

import pytest
import tinymodels
from harness_case import Case, Signature, requires

DEVICE_MISMATCH = Signature(
    "tl-fold-value-biases-devices", "RuntimeError",
    r"Expected all tensors to be on the same device, but found at least two devices")

CASE = Case(
    failure='fold_value_biases mixes CUDA and CPU tensors loading Llama weights',
    upstream=(
        "TransformerLensOrg/TransformerLens#517",
        "TransformerLensOrg/TransformerLens#371",
        "TransformerLensOrg/TransformerLens#461",
        "TransformerLensOrg/TransformerLens#489",
    ),
    about=("transformer-lens",),
)

NEEDS_TL = requires(cuda=True, packages={"transformer-lens": "", "transformers": ""})


def _config(device: str) -> Any:
    from transformer_lens import HookedTransformerConfig

    spec = tinymodels.LLAMA
    d_head = spec["hidden_size"] // spec["num_attention_heads"]
    return HookedTransformerConfig(
        d_model=spec["hidden_size"], d_head=d_head, n_heads=spec["num_attention_heads"],
        d_mlp=spec["intermediate_size"], n_layers=spec["num_hidden_layers"], n_ctx=64,
        d_vocab=spec["vocab_size"], act_fn="silu", normalization_type="RMS", eps=1e-6,
        positional_embedding_type="rotary", rotary_dim=d_head, final_rms=True,
        gated_mlp=True, device=device)


def _load(hf_device: str, tl_device: str) -> Any:
    """What ``from_pretrained`` does for a Llama: convert the HF weights, then fold them."""
    from transformer_lens import HookedTransformer
    from transformer_lens.loading_from_pretrained import convert_llama_weights

    hf = tinymodels.llama().to(hf_device)
    cfg = _config(tl_device)
    model = HookedTransformer(cfg)
    model.load_and_process_state_dict(convert_llama_weights(hf, cfg))
    return model


def _forward(model: Any) -> Any:
    import torch

    tokens = torch.randint(0, tinymodels.LLAMA["vocab_size"], (1, 8), device=model.cfg.device)
    logits = model(tokens)
    assert torch.isfinite(logits).all()
    return logits


@NEEDS_TL
@pytest.mark.parametrize("hf_device", ["cpu", "cuda"], ids=["hf_cpu", "hf_cuda"])
@DEVICE_MISMATCH.reproduces
def test_repro(hf_device: str, harness_record: Any) -> None:
    """``cfg.device="cuda"``, with the HF model on the CPU (1.13.0 fails) or CUDA (<= 1.12.1)."""
    model = _load(hf_device, "cuda")
    harness_record("logits_device", str(_forward(model).device))


@NEEDS_TL
def test_workaround_load_on_cpu(harness_record: Any) -> None:
    """Documented fix: build and fold on the CPU, then move the whole model to CUDA."""
    model = _load("cpu", "cpu").to("cuda")
    harness_record("logits_device", str(_forward(model).device))

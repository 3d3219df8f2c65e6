"""LLM-Foundry: FP8 training of a tiny MPT with TransformerEngine layers.

Upstream: mosaicml/llm-foundry#885 #903, fix PR #958 (first in v0.6.0) on TE PR #596 (TE >= 1.4).
Read against llm-foundry 0.4.0 (``models/layers/fc.py``, ``ffn.py``, ``mpt/modeling_mpt.py``) and
composer 0.17.2 (``core/precision.py``).
Mechanism (likely; the reporters' error text was never published): before 0.6.0,
``fc_type: te`` / ``ffn_type: te_ln_mlp`` build ``te.Linear`` / ``te.LayerNormMLP`` without the
``device`` argument, so with ``init_device: meta`` the model is part meta, part CUDA. Composer's
``amp_fp8`` wraps ``te.fp8_autocast`` and needs compute capability >= 8.9.
The reporters' workaround removes every TE layer: the step then runs with FP8 off, and the
variant records ``te_modules: 0`` so the table cannot read it as a fix.
"""

from __future__ import annotations

from typing import Any

import pytest
from harness_case import Signature, requires

# What a part-meta model does when it is moved or run; the case's own device check says it first.
MIXED_DEVICES = Signature(
    "mpt-mixed-devices", "RuntimeError",
    r"parameters on more than one device|Expected all tensors to be on the same device"
    r"|Tensor on device meta is not on the expected device|Cannot copy out of meta tensor")

FP8_GPU = requires(cuda=True, cc=">=8.9", cc_why="needs FP8 hardware (compute capability >= 8.9)",
                   packages={"llm-foundry": "", "mosaicml": "", "transformer-engine": ""})


class MixedDevicesError(RuntimeError):
    """The built model's parameters do not share one device."""


def _mpt(init_device: str, *, te_layers: bool) -> Any:
    from llmfoundry.models.mpt import MPTConfig, MPTForCausalLM

    ffn_type = "te_ln_mlp" if te_layers else "mptmlp"
    config = MPTConfig(d_model=256, n_heads=4, n_layers=2, expansion_ratio=4, max_seq_len=64,
                       vocab_size=256, init_device=init_device, no_bias=True,
                       attn_config={"attn_impl": "torch"},
                       fc_type="te" if te_layers else "torch", ffn_config={"ffn_type": ffn_type})
    return MPTForCausalLM(config)


def _place_on_cuda(model: Any, harness_record: Any) -> Any:
    """Check that all parameters share one device, then materialise the model on CUDA."""
    devices = sorted({str(p.device) for p in model.parameters()})
    harness_record("parameter_devices", devices)
    if len(devices) > 1:
        raise MixedDevicesError(f"parameters on more than one device: {', '.join(devices)}")
    if devices == ["meta"]:
        model.to_empty(device="cuda")
        model.apply(model.param_init_fn)
        return model
    return model.to("cuda")


def _te_module_count(model: Any) -> int:
    from transformer_engine.pytorch.module.base import TransformerEngineBaseModule

    return sum(isinstance(m, TransformerEngineBaseModule) for m in model.modules())


def _fp8_training_step(model: Any) -> float:
    import torch
    from composer.core.precision import get_precision_context

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 256, (16, 64), device="cuda")  # token count a multiple of 16 for FP8
    with get_precision_context("amp_fp8"):
        logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)).float(),
                                             ids[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    return float(loss)


@FP8_GPU
@pytest.mark.parametrize("init_device", [pytest.param("meta", marks=MIXED_DEVICES.reproduces),
                                         pytest.param("cpu", marks=MIXED_DEVICES.reproduces)])
def test_repro(init_device: str, harness_record: Any) -> None:
    """``fc_type: te`` + ``ffn_type: te_ln_mlp``, one FP8 training step. ``cpu`` is what the
    torch 2.1.0+cu121 reporters needed; ``meta`` is the default the fix restores."""
    model = _place_on_cuda(_mpt(init_device, te_layers=True), harness_record)
    harness_record("te_modules", _te_module_count(model))
    harness_record("loss", _fp8_training_step(model))


@FP8_GPU
def test_workaround_no_te(harness_record: Any) -> None:
    """The reporters' workaround: drop the TE layers. Runs, but nothing is in FP8 any more."""
    model = _place_on_cuda(_mpt("meta", te_layers=False), harness_record)
    count = _te_module_count(model)
    harness_record("te_modules", count)
    if count == 0:  # shown as a dagger in the table: this "PASS" is not a fix
        harness_record("caveat", "FP8 is off: no TransformerEngine modules remain")
    harness_record("loss", _fp8_training_step(model))

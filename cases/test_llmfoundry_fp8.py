"""LLM-Foundry: FP8 training of a tiny MPT with TransformerEngine layers.

Upstream: mosaicml/llm-foundry#885 #903, fix PR #958 (first in v0.6.0) on TE PR #596 (TE >= 1.4).
Read against llm-foundry v0.3.0, v0.4.0 and v0.6.0 (``models/layers/ffn.py``, ``fc.py``,
``blocks.py``, ``configuration_mpt.py``, ``utils/config_utils.py``, ``utils/param_init_fns.py``)
and composer 0.16.3 / 0.17.2 / 0.20.1 (``core/precision.py``, ``trainer/trainer.py``,
``devices/device_gpu.py``, ``trainer/dist_strategy.py``).

What the reporters ran (TUTORIAL.md's ``ffn_config_defaults`` is read by nothing): ``fc_type: te``
with the default ``mptmlp`` FFN, so MPTMLP and the attention projections are ``te.Linear``.
Before #958 those are built without ``device`` (TE puts them on CUDA); #958 passes it. The
train script on one GPU has no FSDP, turns ``init_device: meta`` into ``cpu``, and Composer
then moves the model with ``module.to(cuda)``; with FSDP, Composer materialises a meta model
module by module (``to_empty`` + ``param_init_fn``), the deferred path #958 fixed. Composer's
``amp_fp8`` wraps ``te.fp8_autocast`` and needs compute capability >= 8.9. The reporters'
error text was never published, so ``repro`` declares the failures the code itself can raise
on this path and reports anything else as FAIL, with its message, for the table to show.

``ffn_type: te_ln_mlp`` set for real fails earlier, in 0.3.0 to 0.7.0 alike:
``configuration_mpt.py`` puts ``bias`` into ``ffn_config`` and ``blocks.py`` passes
``bias=`` again. It is its own variant, with its own signature. It needs TE to import but no
GPU (the arguments are bound before any TE module is built), so it runs on a CPU with
``fc_type: torch``; from 0.8.0 (``build_ffn(..., ffn_kwargs=)``) the binding passes and the
path goes on to ``te.LayerNormMLP``, whose constructor needs CUDA: SKIP there on a CPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness_case import Case, Signature, requires

# configuration_mpt._validate_config when ``import transformer_engine.pytorch`` fails; TE
# v0.10-v1.4 import flash-attn's version at import time, so a TE / flash-attn mismatch ends here.
TE_IMPORT_FAILS = Signature(
    "llmfoundry-te-import-fails", "ImportError",
    r"TransformerEngine import fail\. `fc_type: te` requires TransformerEngine")
# llm-foundry >= 0.6.0 passes ``device=`` to te.Linear, which TE < 0.12 does not take.
TE_LINEAR_NO_DEVICE = Signature(
    "te-linear-no-device-argument", "TypeError", r"unexpected keyword argument 'device'")
TE_LN_MLP_BIAS = Signature(
    "mpt-te-ln-mlp-bias-twice", "TypeError",
    r"build_ffn\(\) got multiple values for keyword argument 'bias'")

CASE = Case(
    failure='LLM-Foundry FP8 training with TransformerEngine layers fails',
    upstream=(
        "mosaicml/llm-foundry#885",
        "mosaicml/llm-foundry#903",
        "mosaicml/llm-foundry#958",
        "NVIDIA/TransformerEngine#596",
    ),
    about=("llm-foundry", "transformer-engine"),
)

NEEDS_FOUNDRY = {"llm-foundry": "", "mosaicml": "", "transformer-engine": ""}
FP8_GPU = requires(cuda=True, cc=">=8.9", cc_why="needs FP8 hardware (compute capability >= 8.9)",
                   packages=NEEDS_FOUNDRY)
INITS = [
    # The one-GPU train script: no FSDP, so meta becomes cpu; Composer then does .to(cuda).
    pytest.param("cpu", id="cpu_init",
                 marks=[TE_IMPORT_FAILS.reproduces, TE_LINEAR_NO_DEVICE.reproduces]),
    # FSDP's deferred init (meta, then to_empty + param_init_fn per module): what #958 fixed.
    pytest.param("meta", id="meta_deferred",
                 marks=[TE_IMPORT_FAILS.reproduces, TE_LINEAR_NO_DEVICE.reproduces]),
]
TOKENS, SEQ, VOCAB = 16, 64, 256  # 16 x 64 tokens: FP8 GEMMs want dims divisible by 16


def mpt_config_kwargs(init_device: str, *, fc_type: str, ffn_type: str = "mptmlp"
                      ) -> dict[str, Any]:
    """failures.md §3's tiny MPT: 2 layers, d_model 256, 4 heads, torch attention (the default,
    ``triton`` up to 0.7 and ``flash`` from 0.8, needs another package), ``fc_type`` as given,
    the default ``mptmlp`` FFN unless told."""
    return {"d_model": 256, "n_heads": 4, "n_layers": 2, "expansion_ratio": 4,
            "max_seq_len": SEQ, "vocab_size": VOCAB, "init_device": init_device,
            "no_bias": True, "attn_config": {"attn_impl": "torch"}, "fc_type": fc_type,
            "ffn_config": {"ffn_type": ffn_type}}


def _build(init_device: str, fc_type: str, harness_record: Any) -> Any:
    """Build as llm-foundry's trainer does, then put it on the GPU as Composer does."""
    import torch
    from llmfoundry.models.mpt import MPTConfig, MPTForCausalLM

    config = MPTConfig(**mpt_config_kwargs(init_device, fc_type=fc_type))
    if init_device == "meta":
        from llmfoundry.models.utils.meta_init_context import init_empty_weights

        with init_empty_weights():  # the train script's init_context for meta
            model = MPTForCausalLM(config)
        harness_record("parameter_devices", _devices(model))
        # composer trainer/dist_strategy.py prepare_fsdp_module: to_empty, then param_init_fn.
        model.to_empty(device=torch.device("cuda"))
        model.apply(model.param_init_fn)
        return model
    model = MPTForCausalLM(config)
    harness_record("parameter_devices", _devices(model))
    return model.to(torch.device("cuda"))  # composer devices/device_gpu.py module_to_device


def _devices(model: Any) -> list[str]:
    return sorted({str(p.device) for p in model.parameters()})


def _te_module_count(model: Any) -> int:
    try:
        from transformer_engine.pytorch.module.base import TransformerEngineBaseModule
    except ImportError:
        return 0
    return sum(isinstance(m, TransformerEngineBaseModule) for m in model.modules())


def _fp8_training_step(model: Any) -> float:
    """One step as Composer's trainer runs it: forward and loss under the precision context,
    backward outside it, then the optimizer."""
    import torch
    from composer.core.precision import get_precision_context

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, VOCAB, (TOKENS, SEQ), device="cuda")
    with get_precision_context("amp_fp8"):
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.size(-1)).float(), ids[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss), f"loss is {loss.item()}"
    return float(loss)


@FP8_GPU
@pytest.mark.parametrize("init_device", INITS)
def test_repro(init_device: str, harness_record: Any) -> None:
    """``fc_type: te`` + the default ``mptmlp`` FFN, one FP8 training step under Composer."""
    model = _build(init_device, "te", harness_record)
    harness_record("te_modules", _te_module_count(model))
    harness_record("loss", _fp8_training_step(model))


@requires(packages=NEEDS_FOUNDRY)
@TE_LN_MLP_BIAS.reproduces
def test_te_ln_mlp(harness_record: Any) -> None:
    """``ffn_type: te_ln_mlp`` for real, with ``fc_type: torch`` so that only the FFN is TE's:
    MPTConfig imports TransformerEngine and puts ``bias`` into ``ffn_config``, and MPTBlock's
    ``build_ffn(..., bias=..., **ffn_config)`` fails while binding its arguments, before any TE
    module is built (no GPU needed). Where that is fixed (0.8.0: ``ffn_kwargs=``), the real path
    goes on to build ``te.LayerNormMLP``, which needs CUDA."""
    try:
        import transformer_engine
        import transformer_engine.pytorch  # llm-foundry checks this first
    except Exception as exc:  # any failure to load TE: not what this variant is about
        pytest.skip(f"needs transformer_engine.pytorch to import; here it does not: "
                    f"{type(exc).__name__}: {exc}"[:300])
    # On the record: the TE that really imported here (no stand-in), and from where.
    harness_record("transformer_engine", f"{transformer_engine.__version__} "
                                         f"({Path(transformer_engine.__file__).parent})")
    import torch
    from llmfoundry.models.mpt import MPTConfig, MPTForCausalLM

    config = MPTConfig(**mpt_config_kwargs("cpu", fc_type="torch", ffn_type="te_ln_mlp"))
    try:
        model = MPTForCausalLM(config)
    except AssertionError as exc:
        if (torch.cuda.is_available() or "needs CUDA" not in str(exc)
                or not _raised_in_te_ln_mlp(exc)):
            raise
        harness_record("build_ffn_arguments", "bound")
        pytest.skip("build_ffn's arguments bound (no 'bias' given twice here); building "
                    f"te.LayerNormMLP then needs a CUDA GPU, and none is visible: "
                    f"TransformerEngine says {str(exc)!r}")
    harness_record("te_modules", _te_module_count(model))


def _raised_in_te_ln_mlp(exc: BaseException) -> bool:
    """True when ``exc`` came out of ``te.LayerNormMLP``'s constructor (TE's "needs CUDA")."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "__init__" and Path(code.co_filename).name == "layernorm_mlp.py":
            return True
        tb = tb.tb_next
    return False


@FP8_GPU
def test_workaround_no_te(harness_record: Any, harness_caveat: Any) -> None:
    """The reporters' workaround: drop the TE layers. Runs, but nothing is in FP8 any more."""
    model = _build("cpu", "torch", harness_record)
    count = _te_module_count(model)
    harness_record("te_modules", count)
    if count == 0:  # shown as a dagger in the table: this "PASS" is not a fix
        harness_caveat("FP8 is off: no TransformerEngine modules remain")
    harness_record("loss", _fp8_training_step(model))

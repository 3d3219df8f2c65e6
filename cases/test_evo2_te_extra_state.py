"""Evo2 / TransformerEngine: ``KeyError: 'recipe'`` loading a TE-1.x FP8 ``_extra_state``.

Upstream: ArcInstitute/evo2#35 #75 #122 #144 #9 #162; NVIDIA/TransformerEngine#1623 #1553, fix
PR #1724; vortex PR #70. Read against TE 1.13.0, 2.2.0 and 2.4.0
(``transformer_engine/pytorch/module/base.py``, ``set_extra_state``).
Mechanism: TE 1.x saved ``_extra_state`` as a ``torch.save``d dict in a ``BytesIO`` with no
``recipe`` key; TE 2.0-2.3 read ``state["recipe"]`` unconditionally; TE >= 2.4 default a
missing recipe to ``DelayedScaling()`` (history 1024), so a history-16 checkpoint then fails
copying the amax history. Separately, FP8 execution asserts compute capability >= 8.9.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from harness_case import Case, Signature, caveat, requires

RECIPE_MISSING = Signature("te-recipe-keyerror", "KeyError", r"^'recipe'$")
HISTORY_MISMATCH = Signature(
    "te-amax-history-size", "RuntimeError",
    r"size of tensor a \((1024|16)\) must match the size of tensor b \((16|1024)\)")
FP8_PRE_ADA = Signature(
    "te-fp8-pre-ada", "AssertionError",
    r"Device compute capability 8\.9 or higher required for FP8 execution")

CASE = Case(
    failure="KeyError: 'recipe' loading a TE-1.x FP8 _extra_state into TransformerEngine 2.x",
    upstream=(
        "ArcInstitute/evo2#35",
        "ArcInstitute/evo2#75",
        "ArcInstitute/evo2#122",
        "ArcInstitute/evo2#144",
        "ArcInstitute/evo2#9",
        "ArcInstitute/evo2#162",
        "NVIDIA/TransformerEngine#1623",
        "NVIDIA/TransformerEngine#1553",
        "NVIDIA/TransformerEngine#1724",
        "Zymrael/vortex#70",
    ),
    about=("transformer-engine",),
)

NEEDS_TE = requires(cuda=True, packages={"transformer-engine": ""})
EVO2_HISTORY = 16  # the amax history length the Evo2 checkpoints were written with
SIZE = 32


def _legacy_extra_state(history: int) -> io.BytesIO:
    """What TE 1.x's ``get_extra_state`` wrote for one FP8 GEMM: no ``recipe`` key."""
    import torch

    # One GEMM: forward holds input+weight+output scales (3), backward grad-output+grad-input (2).
    fwd, bwd = 3, 2
    state = {
        "scale_fwd": torch.ones(fwd), "scale_inv_fwd": torch.ones(fwd),
        "amax_history_fwd": torch.zeros(history, fwd),
        "scale_bwd": torch.ones(bwd), "scale_inv_bwd": torch.ones(bwd),
        "amax_history_bwd": torch.zeros(history, bwd),
        "extra_fp8_variables": {"num_gemms": 1, "fp8_checkpoint": True},
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return buffer


def _linear_with_legacy_state(history: int) -> tuple[Any, dict[str, Any]]:
    import transformer_engine.pytorch as te

    layer = te.Linear(SIZE, SIZE, params_dtype=_bf16())
    state = layer.state_dict()
    state["_extra_state"] = _legacy_extra_state(history)
    return layer, state


def _bf16() -> Any:
    import torch

    return torch.bfloat16


def _te_version() -> str:
    import importlib.metadata as md

    for name in ("transformer-engine", "transformer_engine"):
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            continue
    return "unknown"


@NEEDS_TE
@pytest.mark.parametrize("history", [EVO2_HISTORY, 1024], ids=["history16", "history1024"])
@RECIPE_MISSING.reproduces
@HISTORY_MISMATCH.reproduces
def test_repro(history: int, harness_record: Any) -> None:
    """Load a TE-1.x-style checkpoint of one ``te.Linear`` into this TE."""
    harness_record("te_version", _te_version())
    layer, state = _linear_with_legacy_state(history)
    layer.load_state_dict(state)
    harness_record("amax_history_len", layer.fp8_meta["recipe"].amax_history_len)


@NEEDS_TE
def test_workaround_inject_recipe(harness_record: Any) -> None:
    """(a) Put the recipe the checkpoint was trained with into the legacy state, then load."""
    import torch
    from transformer_engine.common.recipe import DelayedScaling, Format

    layer, state = _linear_with_legacy_state(EVO2_HISTORY)
    legacy = torch.load(state["_extra_state"], map_location="cpu")
    legacy["recipe"] = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=EVO2_HISTORY,
                                      amax_compute_algo="max")
    if hasattr(torch.serialization, "add_safe_globals"):
        torch.serialization.add_safe_globals(recipe_safe_globals())
    buffer = io.BytesIO()
    torch.save(legacy, buffer)
    buffer.seek(0)
    state["_extra_state"] = buffer
    layer.load_state_dict(state)
    harness_record("amax_history_len", layer.fp8_meta["recipe"].amax_history_len)
    assert layer.fp8_meta["recipe"].amax_history_len == EVO2_HISTORY


def recipe_safe_globals() -> list[Any]:
    """What ``torch.load(weights_only=True)`` (the default from torch 2.6) must be allowed to
    rebuild for a pickled ``DelayedScaling``: the recipe, its ``Format`` enum, and the
    ``_FormatHelper`` tuple that each ``Format`` member's value is (as vortex registers)."""
    from transformer_engine.common import recipe

    names = ("DelayedScaling", "Format", "_FormatHelper")
    return [getattr(recipe, name) for name in names if hasattr(recipe, name)]


@NEEDS_TE
@caveat("FP8 scaling state discarded: amax history restarts from zero")
def test_workaround_drop_extra_state(harness_record: Any) -> None:
    """(b) Drop ``_extra_state`` and load with ``strict=False``: loads, but FP8 state is lost."""
    layer, state = _linear_with_legacy_state(EVO2_HISTORY)
    del state["_extra_state"]
    result = layer.load_state_dict(state, strict=False)
    harness_record("missing_keys", list(result.missing_keys))


@NEEDS_TE
@requires(packages={"transformer-engine": "<2"})
def test_workaround_pin_te1(harness_record: Any) -> None:
    """(c) Pin TE 1.x: the legacy state loads as written. SKIP on TE 2.x environments."""
    layer, state = _linear_with_legacy_state(EVO2_HISTORY)
    layer.load_state_dict(state)
    harness_record("amax_history_len", layer.fp8_meta["recipe"].amax_history_len)
    assert layer.fp8_meta["recipe"].amax_history_len == EVO2_HISTORY


@requires(cuda=True, cc="<8.9", cc_why="needs a pre-Ada GPU (compute capability < 8.9)",
          packages={"transformer-engine": ""})
@FP8_PRE_ADA.reproduces
def test_fp8_pre_ada() -> None:
    """FP8 forward under ``fp8_autocast`` on an A100/T4-class GPU: TE refuses with an assert."""
    _fp8_forward()


@requires(cuda=True, cc=">=8.9", cc_why="needs FP8 hardware (compute capability >= 8.9)",
          packages={"transformer-engine": ""})
def test_fp8_forward(harness_record: Any) -> None:
    """The same FP8 forward on Ada/Hopper or newer must work: the failure is hardware only."""
    out = _fp8_forward()
    harness_record("output_dtype", str(out.dtype))


def _fp8_forward() -> Any:
    import torch
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Format

    layer = te.Linear(SIZE, SIZE, params_dtype=torch.bfloat16)
    inp = torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16)
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=EVO2_HISTORY)
    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
        out = layer(inp)
    torch.cuda.synchronize()
    assert torch.isfinite(out.float()).all()
    return out

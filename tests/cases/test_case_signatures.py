"""Every documented-failure signature in cases/ against the real upstream message, and against a
different error of the same type (which must not match).

The matching texts are quoted from the upstream issue threads or the library's source, as cited
beside each. A signature added to cases/ without an entry here fails
``test_every_signature_is_covered``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from harness_case import Signature

CASES = Path(__file__).resolve().parents[2] / "cases"
sys.path.insert(0, str(CASES))

FA3_LOG = (
    "Error building extension 'batch_mla_attention_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_"
    "dtype_idx_i32_head_dim_ckv_512_head_dim_kpe_64_profiler_False_sm90': [1/3] nvcc ...\n"
    "/root/.cache/flashinfer/90/generated/batch_mla_attention_dtype_q_bf16_dtype_kv_bf16_dtype_o_"
    "bf16_dtype_idx_i32_head_dim_ckv_512_head_dim_kpe_64_profiler_False_sm90/"
    "batch_mla_sm90_run.cu(65): error: a value of type \"DTypeO *\" {aka}cannot be assigned to an "
    "entity of type \"float *\"\n")

# (module, name) -> (real upstream error, same type but a different failure)
CORPUS: dict[tuple[str, str], tuple[BaseException, BaseException]] = {
    # transformers#27769, petals#432, mergekit#175: the q_proj forward on the CPU.
    ("test_mergekit_fp16", "ADDMM_HALF"): (
        RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'"),
        RuntimeError("\"LayerNormKernelImpl\" not implemented for 'Half'")),
    ("test_probes", "ADDMM_HALF"): (
        RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'"),
        RuntimeError("\"addmm_impl_cpu_\" not implemented for 'ComplexHalf'")),
    # torch/csrc/utils/tensor_numpy.cpp, when torch was built against numpy 1.x.
    ("test_probes", "NUMPY2_ABI"): (
        RuntimeError("Numpy is not available"),
        RuntimeError("Can't call numpy() on Tensor that requires grad. "
                     "Use tensor.detach().numpy() instead.")),
    # aten/src/ATen/native/cuda/Blas.cpp (torch 2.3-2.5).
    ("test_probes", "SCALED_MM_UNSUPPORTED"): (
        RuntimeError("torch._scaled_mm is only supported on CUDA devices with compute "
                     "capability >= 9.0 or 8.9, or ROCm MI300+"),
        RuntimeError("mat2 must be col_major")),
    # transformer_engine/pytorch/fp8.py check_fp8_support; the other is TE's GEMM shape assert.
    ("test_probes", "TE_FP8_UNSUPPORTED"): (
        AssertionError("Device compute capability 8.9 or higher required for FP8 execution."),
        AssertionError("FP8 execution requires 2D input matrices with height divisible by 8 "
                       "and width divisible by 16, but got tensor with dims=[3, 32]")),
    # TE 2.0-2.3 base.py set_extra_state: self.fp8_meta["recipe"] = state["recipe"].
    ("test_evo2_te_extra_state", "RECIPE_MISSING"): (
        KeyError("recipe"), KeyError("scale_fwd")),
    # NVIDIA/TransformerEngine#1623 / evo2#144: the Evo2 checkpoint (history 16) on TE >= 2.4.
    ("test_evo2_te_extra_state", "HISTORY_MISMATCH"): (
        RuntimeError("The size of tensor a (1024) must match the size of tensor b (16) at "
                     "non-singleton dimension 0"),
        RuntimeError("The size of tensor a (32) must match the size of tensor b (64) at "
                     "non-singleton dimension 1")),
    # TE check_fp8_support, raised under fp8_autocast on an A100 (evo2#9); the other is Ada's.
    ("test_evo2_te_extra_state", "FP8_PRE_ADA"): (
        AssertionError("Device compute capability 8.9 or higher required for FP8 execution."),
        AssertionError("CublasLt version 12.1.3.x or higher required for FP8 execution on "
                       "Ada.")),
    # ktransformers#1176 (H100) and #1205 (H20, with the "aka"), the fork's fa3 sources.
    ("test_ktransformers_flashinfer", "FA3_MLA_BUILD"): (
        RuntimeError(FA3_LOG.format(aka="(aka \"__nv_bfloat16 *\") ")),
        RuntimeError("Error building extension 'batch_mla_attention_sm90': "
                     "fatal error: cuda_runtime.h: No such file or directory")),
    # llm-foundry v0.3.0-v0.6.0 configuration_mpt.py _validate_config; the other is the
    # package's own "install the extras" ImportError from llmfoundry/__init__.py.
    ("test_llmfoundry_fp8", "TE_IMPORT_FAILS"): (
        ImportError("TransformerEngine import fail. `fc_type: te` requires TransformerEngine be "
                    "installed. The required version of transformer_engine also requires "
                    "FlashAttention v1.0.6 is installed:\npip install flash-attn==1.0.6 "
                    "--no-build-isolation \npip install git+https://github.com/NVIDIA/"
                    "TransformerEngine.git@144e4888b2cdd60bd52e706d5b7a79cb9c1a7156"),
        ImportError("Please make sure to pip install .[gpu] to get the requirements for the "
                    "LLM example.")),
    # TE v0.10 module/linear.py Linear.__init__ has no device (llm-foundry >= 0.6.0 passes it).
    ("test_llmfoundry_fp8", "TE_LINEAR_NO_DEVICE"): (
        TypeError("Linear.__init__() got an unexpected keyword argument 'device'"),
        TypeError("Linear.__init__() got an unexpected keyword argument 'params_dtype'")),
    # blocks.py build_ffn(..., bias=not no_bias, **ffn_config) with ffn_config["bias"] set
    # (Python >= 3.9 names the function by its qualified name).
    ("test_llmfoundry_fp8", "TE_LN_MLP_BIAS"): (
        TypeError("llmfoundry.models.layers.ffn.build_ffn() got multiple values for keyword "
                  "argument 'bias'"),
        TypeError("llmfoundry.models.layers.ffn.build_ffn() got multiple values for keyword "
                  "argument 'device'")),
    # TransformerLens#517 / #371: fold_value_biases.
    ("test_transformerlens_device", "DEVICE_MISMATCH"): (
        RuntimeError("Expected all tensors to be on the same device, but found at least two "
                     "devices, cuda:0 and cpu!"),
        RuntimeError("expected scalar type Float but found Half")),
}


def _signature(module: str, name: str) -> Signature:
    sig = getattr(importlib.import_module(module), name)
    assert isinstance(sig, Signature)
    return sig


@pytest.mark.parametrize(("module", "name"), sorted(CORPUS), ids=lambda v: str(v))
def test_signature_matches_the_upstream_message(module: str, name: str) -> None:
    real, _ = CORPUS[(module, name)]
    assert _signature(module, name).matches(real)


@pytest.mark.parametrize(("module", "name"), sorted(CORPUS), ids=lambda v: str(v))
def test_signature_rejects_another_error_of_the_same_type(module: str, name: str) -> None:
    real, other = CORPUS[(module, name)]
    assert type(other) is type(real)
    assert not _signature(module, name).matches(other)


def test_every_signature_is_covered() -> None:
    declared = set()
    for path in sorted(CASES.glob("test_*.py")):
        module = importlib.import_module(path.stem)
        declared |= {(path.stem, name) for name, value in vars(module).items()
                     if isinstance(value, Signature)}
    assert declared == set(CORPUS)


def test_a_match_deep_in_a_build_log_is_shown_with_the_matching_line() -> None:
    real, _ = CORPUS[("test_ktransformers_flashinfer", "FA3_MLA_BUILD")]
    evidence = _signature("test_ktransformers_flashinfer", "FA3_MLA_BUILD").evidence(real)
    assert evidence is not None
    head, line = evidence.split(" ... ")
    assert head.startswith("RuntimeError: Error building extension 'batch_mla_attention_")
    assert line.endswith('cannot be assigned to an entity of type "float *"')
    assert "batch_mla_sm90_run.cu(65): error:" in line

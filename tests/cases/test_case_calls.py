"""A case's calls into upstream code, checked against the upstream code at the pinned version.

The GPU-only variants cannot run here, but whether their calls fit the upstream signatures
can be checked now, from the upstream source itself: an argument the case forgets (the fork's
``bsz_tensor``) would otherwise be found only on a GPU, as a TypeError that is not the failure.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import ROOT, WHEELHOUSE, needs_wheelhouse

CASES = ROOT / "cases"
sys.path.insert(0, str(CASES))
FORK_WHEEL = WHEELHOUSE / "flashinfer_python-0.2.3-py3-none-any.whl"

# flash-attn v1.0.7, flash_attn/flash_attn_interface.py (1.x has no flash_attn_func).
FLASH_ATTN_1_0_7 = '''
def flash_attn_unpadded_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             dropout_p, softmax_scale=None, causal=False,
                             return_attn_probs=False, deterministic=False):
    pass
'''


def signature_in(source: str, qualname: str) -> inspect.Signature:
    """The signature of ``qualname`` (``Class.method`` or ``function``) in ``source``, without
    importing it: defaults become None, annotations are dropped."""
    tree = ast.parse(source)
    *outer, name = qualname.split(".")
    scope: list[ast.stmt] = tree.body
    for part in outer:
        scope = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == part).body
    node = next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)
    args = node.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        arg.annotation = None
    args.defaults = [ast.Constant(None) for _ in args.defaults]
    args.kw_defaults = [None if d is None else ast.Constant(None) for d in args.kw_defaults]
    stub = ast.FunctionDef(name=node.name, args=args, body=[ast.Pass()], decorator_list=[],
                           returns=None, type_params=[])
    namespace: dict[str, Any] = {}
    exec(compile(ast.fix_missing_locations(ast.Module([stub], [])), qualname, "exec"),
         namespace)
    return inspect.signature(namespace[node.name])


def calls_in(path: Path, attribute: str) -> list[ast.Call]:
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "attr", getattr(n.func, "id", None)) == attribute]


def bind(call: ast.Call, signature: inspect.Signature, *, bound_self: bool) -> None:
    positional = [None] * (len(call.args) + bound_self)
    signature.bind(*positional, **{kw.arg: None for kw in call.keywords if kw.arg})


@needs_wheelhouse
def test_the_end_to_end_case_calls_the_forks_plan_as_the_fork_defines_it() -> None:
    with zipfile.ZipFile(FORK_WHEEL) as wheel:
        mla = wheel.read("flashinfer/mla.py").decode()
    plan = signature_in(mla, "BatchMLAPagedAttentionWrapper.plan")
    assert "bsz_tensor" in plan.parameters  # the fork's addition upstream 0.2.3 lacks
    (call,) = calls_in(CASES / "test_ktransformers_flashinfer.py", "plan")
    bind(call, plan, bound_self=True)
    (run_call,) = calls_in(CASES / "test_ktransformers_flashinfer.py", "run")
    bind(run_call, signature_in(mla, "BatchMLAPagedAttentionWrapper.run"), bound_self=True)


def test_the_flash_attn_probe_calls_the_1x_api_as_1_0_7_defines_it() -> None:
    (call,) = calls_in(CASES / "test_probes.py", "attention")[1:]  # [0] is the 2.x call
    bind(call, signature_in(FLASH_ATTN_1_0_7, "flash_attn_unpadded_func"), bound_self=False)


def test_the_te_fp8_probe_uses_whichever_check_the_release_has() -> None:
    probes = importlib.import_module("test_probes")

    def public() -> tuple[bool, str]:
        return True, ""

    def private() -> tuple[bool, str]:
        return False, "Device compute capability 8.9 or higher required for FP8 execution."

    assert probes.fp8_check_of(SimpleNamespace(check_fp8_support=public))[0] == (
        "check_fp8_support")
    # TE v0.10 / v0.12: only the private name.
    assert probes.fp8_check_of(SimpleNamespace(_check_fp8_support=private)) == (
        "_check_fp8_support", private)
    with pytest.raises(pytest.skip.Exception, match="needs TransformerEngine's FP8 support "
                       "check; this release has none of check_fp8_support, _check_fp8_support"):
        probes.fp8_check_of(SimpleNamespace())


def test_the_llmfoundry_repro_runs_te_linear_in_the_default_ffn_as_the_reporters_did() -> None:
    """TUTORIAL.md's ffn_config_defaults is read by nothing: the reporters ran fc_type te with
    the default mptmlp FFN. te_ln_mlp is a different failure, in a variant of its own."""
    case = importlib.import_module("test_llmfoundry_fp8")
    for init in ("cpu", "meta"):
        kwargs = case.mpt_config_kwargs(init, fc_type="te")
        assert (kwargs["fc_type"], kwargs["ffn_config"]) == ("te", {"ffn_type": "mptmlp"})
        assert kwargs["attn_config"] == {"attn_impl": "torch"}  # the default needs triton
    variants = {p.id: [m.args[0].name for m in p.marks if m.name == "reproduces"]
                for p in case.INITS}
    assert variants == {"cpu_init": ["llmfoundry-te-import-fails", "te-linear-no-device-argument"],
                        "meta_deferred": ["llmfoundry-te-import-fails",
                                          "te-linear-no-device-argument"]}
    (call,) = [c for c in calls_in(CASES / "test_llmfoundry_fp8.py", "mpt_config_kwargs")
               if any(k.arg == "ffn_type" for k in c.keywords)]
    assert [ast.literal_eval(k.value) for k in call.keywords if k.arg == "ffn_type"] == [
        "te_ln_mlp"]
    # fc_type torch: the attention stays torch's, so on a CPU nothing but the FFN needs TE,
    # and the binding of build_ffn's arguments is reached (fc_type te stops at te.Linear).
    assert [ast.literal_eval(k.value) for k in call.keywords if k.arg == "fc_type"] == ["torch"]


def test_te_ln_mlp_skips_only_for_te_layernorm_mlps_own_cuda_assertion() -> None:
    """Past the binding, 0.8.0 builds te.LayerNormMLP, whose constructor asserts CUDA: that
    and nothing else is the SKIP; an assertion raised anywhere else stays a failure."""
    case = importlib.import_module("test_llmfoundry_fp8")

    def raised_in(filename: str) -> BaseException:
        scope: dict[str, object] = {}
        code = "class M:\n def __init__(self):\n  assert False, 'TransformerEngine needs CUDA.'"
        exec(compile(code, filename, "exec"), scope)  # a frame whose file is TE's
        try:
            scope["M"]()  # type: ignore[operator]
        except AssertionError as exc:
            return exc
        raise AssertionError("not raised")

    te_file = "/env/site-packages/transformer_engine/pytorch/module/layernorm_mlp.py"
    assert case._raised_in_te_ln_mlp(raised_in(te_file))
    assert not case._raised_in_te_ln_mlp(raised_in("/env/site-packages/llmfoundry/ffn.py"))

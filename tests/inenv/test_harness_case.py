"""The in-environment plugin, run by pytester as it runs inside an environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness_case import Requirements, Signature

pytest_plugins = ["pytester"]

ADDMM = Signature("addmm-half-cpu", "RuntimeError",
                  r"\"addmm_impl_cpu_\" not implemented for 'Half'")


def test_signature_matches_the_real_upstream_message() -> None:
    # Text as torch 2.0.1 raises it (seen in mergekit#175 and transformers#27769).
    assert ADDMM.matches(RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'"))


def test_signature_rejects_another_error_of_the_same_type() -> None:
    assert not ADDMM.matches(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not ADDMM.matches(ValueError("\"addmm_impl_cpu_\" not implemented for 'Half'"))


def test_signature_follows_the_exception_chain_and_mro() -> None:
    class Wrapped(Exception):
        pass

    try:
        try:
            raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'")
        except RuntimeError as inner:
            raise Wrapped("merge failed") from inner
    except Wrapped as outer:
        assert ADDMM.matches(outer)
    assert Signature("k", "LookupError", "recipe").matches(KeyError("recipe"))


def test_requirements_in_words() -> None:
    assert Requirements(packages={"no-such-dist-xyz": ">=1"}).unmet() == (
        "needs no-such-dist-xyz>=1; no-such-dist-xyz is not installed")
    assert Requirements(packages={"pytest": "<1"}).unmet().startswith("needs pytest<1; this")
    assert Requirements(executables=("no-such-exe-xyz",)).unmet() == (
        "needs no-such-exe-xyz on PATH; not found")
    assert Requirements(packages={"pytest": ">=7"}).unmet() is None


def run(pytester: pytest.Pytester, source: str) -> dict[str, dict[str, object]]:
    pytester.makepyfile(test_case=source)
    events = pytester.path / "events.jsonl"
    pytester.runpytest("-p", "harness_case", f"--harness-events={events}")
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert lines[0]["event"] == "session" and "gpus" in lines[0]["hardware"]
    return {e["nodeid"].split("::")[1]: e for e in lines if e["event"] == "finish"}


def test_plugin_classifies_each_outcome(pytester: pytest.Pytester) -> None:
    got = run(pytester, """
import pytest
from harness_case import Signature, requires
SIG = Signature("sig", "KeyError", "recipe")

def test_pass(): pass

@SIG.reproduces
def test_repro(): {}["recipe"]

@SIG.reproduces
def test_other(): {}["other"]

@SIG.reproduces
def test_repro_not_affected(): pass

@requires(packages={"no-such-dist-xyz": ">=1"})
def test_unmet(): raise AssertionError("must not run")

@requires(cuda=True, cc="<8.9", cc_why="needs a pre-Ada GPU")
def test_gpu(): raise AssertionError("must not run")

@pytest.fixture
def broken(): raise OSError("fixture broke")

def test_setup_error(broken): pass

def test_recorded(harness_record): harness_record("te_modules", 0)
""")
    outcome = {k: v["outcome"] for k, v in got.items()}
    assert outcome == {"test_pass": "PASS", "test_repro": "REPRODUCED", "test_other": "FAIL",
                       "test_repro_not_affected": "PASS", "test_unmet": "SKIP",
                       "test_gpu": "SKIP", "test_setup_error": "ERROR",
                       "test_recorded": "PASS"}
    assert got["test_repro"]["signature"] == "sig"
    assert got["test_other"]["reason"] == "KeyError: 'other'"
    assert got["test_unmet"]["reason"] == ("needs no-such-dist-xyz>=1; no-such-dist-xyz is "
                                           "not installed")
    assert got["test_gpu"]["reason"].startswith("needs a CUDA GPU")
    assert "fixture broke" in str(got["test_setup_error"]["reason"])
    assert got["test_recorded"]["details"] == {"te_modules": 0}


def test_collect_writes_case_descriptions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_thing='''"""Thing case."""
import pytest
from harness_case import Signature, requires
@requires(cuda=True)
@Signature("s", "E", "m").reproduces
@pytest.mark.parametrize("d", ["a"])
def test_repro(d): pass
''')
    out = pytester.path / "cases.json"
    pytester.runpytest("-p", "harness_case", "--collect-only", f"--harness-collect={out}")
    (item,) = json.loads(Path(out).read_text())
    assert item["case_id"] == "thing" and item["variant"] == "repro[a]"
    assert item["title"] == "Thing case." and item["signatures"][0]["name"] == "s"
    assert item["requires"][0]["cuda"] is True


def test_caveats_are_a_field_declared_or_said_at_run_time(pytester: pytest.Pytester) -> None:
    got = run(pytester, """
from harness_case import caveat

@caveat("FP8 state discarded")
def test_declared(): pass

@caveat("FP8 state discarded")
def test_declared_but_failed(): raise ValueError("no")

def test_said(harness_caveat): harness_caveat("FP8 is off")

def test_quiet(harness_caveat): pass
""")
    assert got["test_declared"]["caveat"] == "FP8 state discarded"
    assert "caveat" not in got["test_declared_but_failed"]  # a FAIL needs no excuse
    assert got["test_said"]["caveat"] == "FP8 is off"
    assert "caveat" not in got["test_quiet"] and got["test_quiet"]["details"] == {}


def test_collect_carries_the_case_metadata(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_meta='''"""Meta case: the first line.

Mechanism, at length."""
from harness_case import Case, caveat
CASE = Case(failure="it breaks", upstream=("owner/repo#12",))

@caveat("not a fix")
def test_workaround():
    """Drops the state."""
''')
    out = pytester.path / "cases.json"
    pytester.runpytest("-p", "harness_case", "--collect-only", f"--harness-collect={out}")
    (item,) = json.loads(Path(out).read_text())
    assert item["failure"] == "it breaks" and item["upstream"] == ["owner/repo#12"]
    assert item["caveats"] == ["not a fix"] and item["doc"] == "Drops the state."
    assert item["description"].endswith("Mechanism, at length.")

    from harness.plan.cases import _variant

    variant = _variant(item)
    assert variant.upstream == ("https://github.com/owner/repo/issues/12",)
    assert variant.metadata()["caveats"] == ["not a fix"]

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


QUEUED = '''
import os
import time
import pytest

def claims(request):
    return os.listdir(request.config.getoption("--harness-queue"))

def test_0(request):
    # The other process must claim a case while this one runs: they share the work.
    deadline = time.time() + 60
    # Three claims: this case, the one this process holds next, one of the other's.
    while len(claims(request)) < 3 and time.time() < deadline:
        time.sleep(0.05)

@pytest.mark.parametrize("n", range(1, 8))
def test_n(n):
    time.sleep(0.1)
'''


def test_processes_sharing_a_queue_run_each_case_once(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "test_q.py").write_text(QUEUED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    nodeids = ["test_q.py::test_0", *(f"test_q.py::test_n[{n}]" for n in range(1, 8))]
    ids = {nodeid: f"cell{i}" for i, nodeid in enumerate(nodeids)}
    queue = tmp_path / "queue"
    queue.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "HARNESS_CELL_IDS": json.dumps(ids), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    procs = {token: subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "harness_case", f"--harness-queue={queue}",
         f"--harness-token={token}", f"--harness-events={tmp_path / token}.jsonl", *nodeids],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for token in ("a", "b")}
    for proc in procs.values():
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out.decode()
    ran: dict[str, list[str]] = {}
    for token in procs:
        events = [json.loads(x) for x in (tmp_path / f"{token}.jsonl").read_text().splitlines()]
        ran[token] = [e["nodeid"] for e in events if e["event"] == "finish"]
        assert all(e["outcome"] == "PASS" for e in events if e["event"] == "finish")
        assert events[-1]["event"] == "drained"  # it stopped because nothing was left
        # Each claim holds the token of the process that ran the case.
        assert all((queue / ids[n]).read_text() == token for n in ran[token])
    assert ran["a"] and ran["b"]
    assert sorted(ran["a"] + ran["b"]) == sorted(nodeids)  # each once, none left out


def test_a_queued_case_is_told_its_real_successor_and_skips_what_another_took(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case after the running one is claimed before it runs: pytest tears down exactly
    what that one does not share, and a class fixture's failing teardown is an ERROR of the
    class's last case here, as in pytest's own loop; a case another process claimed is not
    run."""
    queue = pytester.path / "queue"
    queue.mkdir()
    (queue / "a2").write_text("other")  # another process has TestA::test_2
    ids = {"test_case.py::TestA::test_1": "a1", "test_case.py::TestA::test_2": "a2",
           **{f"test_case.py::TestB::test_{n}": f"b{n}" for n in (1, 2, 3)}}
    monkeypatch.setenv("HARNESS_CELL_IDS", json.dumps(ids))
    pytester.makepyfile(test_case="""
import pytest
ORDER = []

class TestA:
    @pytest.fixture(scope="class", autouse=True)
    def up(self):
        ORDER.append("A up")
        yield
        ORDER.append("A down")
        raise RuntimeError("class teardown fails")

    def test_1(self):
        pass

    def test_2(self):
        raise AssertionError("another process took it")

class TestB:
    def test_1(self):
        assert ORDER == ["A up", "A down"]

    test_2 = test_3 = test_1
""")
    events = pytester.path / "events.jsonl"
    pytester.runpytest("-p", "harness_case", f"--harness-events={events}",
                       f"--harness-queue={queue}", "--harness-token=me", *ids)
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    finished = {e["nodeid"]: e for e in lines if e["event"] == "finish"}
    assert sorted(finished) == ["test_case.py::TestA::test_1", *(
        f"test_case.py::TestB::test_{n}" for n in (1, 2, 3))]
    first = finished.pop("test_case.py::TestA::test_1")
    assert first["outcome"] == "ERROR" and "class teardown fails" in first["reason"]
    assert {e["outcome"] for e in finished.values()} == {"PASS"}
    assert {(queue / n).read_text() for n in ("a1", "b1", "b2", "b3")} == {"me"}
    assert lines[-1] == {**lines[-1], "event": "drained", "missing": []}

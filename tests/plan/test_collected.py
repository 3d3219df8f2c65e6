"""The suite collections kept between runs: found again while nothing that decides them
changed, not found once anything did."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from harness.core.matrix import EnvSpec, SuiteSpec
from harness.plan import collected


def env(**changes: object) -> EnvSpec:
    spec = EnvSpec(name="lib:torch=2.0.1", origin="lib", values=(("torch", "2.0.1"),),
                   backend="uv", python="3.11", requirements=("torch==2.0.1",),
                   pins=(("torch", "2.0.1"),))
    return replace(spec, **changes)  # type: ignore[arg-type]


def suite_in(tmp_path: Path) -> tuple[SuiteSpec, Path]:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    tests = tmp_path / "lib" / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "test_a.py").write_text("def test_one(): pass\n")
    (tests / "sub" / "test_b.py").write_text("def test_two(): pass\n")
    return SuiteSpec(name="mine", path=str(tests), packages=("lib",)), tests


def test_kept_and_found_while_nothing_changes(tmp_path: Path) -> None:
    suite, _ = suite_in(tmp_path)
    cache = tmp_path / "cache"
    assert collected.load(env(), suite, "cpu", cache_dir=cache) is None  # never ran
    collected.save(collected.key(env(), suite, "cpu"), env(), suite,
                   ["test_a.py::test_one", "sub/test_b.py::test_two"], 1, cache_dir=cache)
    found = collected.load(env(), suite, "cpu", cache_dir=cache)
    assert found is not None
    assert found.tests == ("test_a.py::test_one", "sub/test_b.py::test_two")
    assert found.line().startswith("2 tests, 1 module did not collect (as collected there ")
    # what does not change the tests: how long a test may take, how many workers run them
    assert collected.load(env(), replace(suite, timeout=5, workers=4), "cpu",
                          cache_dir=cache) == found
    assert collected.load(env(), suite, "sm_90", cache_dir=cache) is None  # another target


@pytest.mark.parametrize("change", ["test file", "new file", "conftest above", "pin",
                                    "variable", "args"])
def test_anything_that_decides_collection_makes_it_unknown(tmp_path: Path, change: str) -> None:
    suite, tests = suite_in(tmp_path)
    cache = tmp_path / "cache"
    collected.save(collected.key(env(), suite, "cpu"), env(), suite, ["test_a.py::test_one"], 0,
                   cache_dir=cache)
    spec, after = env(), suite
    if change == "test file":
        path = tests / "sub" / "test_b.py"
        path.write_text("def test_two(): pass\ndef test_three(): pass\n")
        os.utime(path, ns=(1, 1))  # the size changed; the time too, whatever the clock says
    elif change == "new file":
        (tests / "sub" / "test_c.py").write_text("")
    elif change == "conftest above":
        (tmp_path / "lib" / "conftest.py").write_text("collect_ignore = ['tests/sub']\n")
    elif change == "pin":
        spec = env(requirements=("torch==2.1.0",), pins=(("torch", "2.1.0"),))
    elif change == "variable":
        after = replace(suite, env=(("BACKENDS", "numpy"),))
    else:
        after = replace(suite, args=("-k", "not slow"))
    assert collected.load(spec, after, "cpu", cache_dir=cache) is None


def test_a_cache_a_folder_cannot_give_is_unknown(tmp_path: Path) -> None:
    suite, _ = suite_in(tmp_path)
    cache = tmp_path / "cache"

    def save(spec: SuiteSpec, tests: list[str], e: EnvSpec | None = None) -> None:
        e = e or env()
        collected.save(collected.key(e, spec, "cpu"), e, spec, tests, 0, cache_dir=cache)

    save(suite, ["test_a.py::test_one"])
    (kept,) = (cache / "collected").iterdir()
    for damage in ('{"tests": ["x"]', '{"tests": ["x"], "errors": Infinity, "at": 1.0}',
                   '{"tests": ["x"], "errors": 0, "at": 1e300}', '{"tests": "x", "errors": 0,'
                   ' "at": 1.0}', '{"tests": [1], "errors": 0, "at": 1.0}', "[" * 100000):
        kept.write_text(damage)
        assert collected.load(env(), suite, "cpu", cache_dir=cache) is None
    gone = replace(suite, path=str(tmp_path / "elsewhere"))  # not on this machine
    save(gone, ["t"])
    assert collected.load(env(), gone, "cpu", cache_dir=cache) is None
    # the tests of an installed package: the environment's key alone decides them
    package = SuiteSpec(name="pkg", pyargs="lib.tests")
    save(package, ["t"])
    assert collected.load(env(), package, "cpu", cache_dir=cache) is not None
    assert collected.load(env(python="3.12"), package, "cpu", cache_dir=cache) is None


def test_a_symlinked_folder_is_stamped_as_pytest_collects_it_and_a_loop_ends(
        tmp_path: Path) -> None:
    suite, tests = suite_in(tmp_path)
    elsewhere = tmp_path / "shared_tests"
    elsewhere.mkdir()
    (elsewhere / "test_c.py").write_text("def test_three(): pass\n")
    (tests / "linked").symlink_to(elsewhere)
    (elsewhere / "loop").symlink_to(tests)  # back up: walked once
    before = collected.key(env(), suite, "cpu")
    assert before is not None
    (elsewhere / "test_d.py").write_text("def test_four(): pass\n")
    assert collected.key(env(), suite, "cpu") != before

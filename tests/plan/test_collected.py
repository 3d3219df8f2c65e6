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
    assert collected.load(env(), suite, cache_dir=tmp_path / "cache") is None  # never ran
    collected.save(env(), suite, ["test_a.py::test_one", "sub/test_b.py::test_two"], 1,
                   cache_dir=tmp_path / "cache")
    found = collected.load(env(), suite, cache_dir=tmp_path / "cache")
    assert found is not None
    assert found.tests == ("test_a.py::test_one", "sub/test_b.py::test_two")
    assert found.line().startswith("2 tests, 1 module did not collect (as collected there ")
    # what does not change the tests: how long a test may take, how many workers run them
    assert collected.load(env(), replace(suite, timeout=5, workers=4),
                          cache_dir=tmp_path / "cache") == found


@pytest.mark.parametrize("change", ["test file", "new file", "conftest above", "pin",
                                    "variable", "args"])
def test_anything_that_decides_collection_makes_it_unknown(tmp_path: Path, change: str) -> None:
    suite, tests = suite_in(tmp_path)
    cache = tmp_path / "cache"
    collected.save(env(), suite, ["test_a.py::test_one"], 0, cache_dir=cache)
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
    assert collected.load(spec, after, cache_dir=cache) is None


def test_a_cache_a_folder_cannot_give_is_unknown(tmp_path: Path) -> None:
    suite, _ = suite_in(tmp_path)
    cache = tmp_path / "cache"
    collected.save(env(), suite, ["test_a.py::test_one"], 0, cache_dir=cache)
    (kept,) = (cache / "collected").iterdir()
    kept.write_text('{"tests": ["x"]')  # damaged
    assert collected.load(env(), suite, cache_dir=cache) is None
    gone = replace(suite, path=str(tmp_path / "elsewhere"))  # not on this machine
    collected.save(env(), gone, ["t"], 0, cache_dir=cache)
    assert collected.load(env(), gone, cache_dir=cache) is None
    # the tests of an installed package: the environment's key alone decides them
    package = SuiteSpec(name="pkg", pyargs="lib.tests")
    collected.save(env(), package, ["t"], 0, cache_dir=cache)
    assert collected.load(env(), package, cache_dir=cache) is not None
    assert collected.load(env(python="3.12"), package, cache_dir=cache) is None

"""``harness envs check`` finds uv once, before its resolves start in threads (the uv package's
finder reads sysconfig, whose first set-up is not thread-safe), and says in one line that
there is none."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uv as uv_package

from harness.cli import main
from harness.core.errors import EnvBuildError
from harness.core.matrix import EnvSpec
from harness.envs import uv
from harness.envs.preflight import check_environments


def spec(name: str) -> EnvSpec:
    return EnvSpec(name=name, origin="test", values=(), backend="uv", python="3.11",
                   requirements=(f"{name}==1.0",), pins=())


@pytest.fixture
def no_uv_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """uv not on PATH (a venv's harness run by its path): found through the uv package,
    whose finder records the thread that asked."""
    asked: list[str] = []
    real = uv_package.find_uv_bin()

    def find() -> str:
        asked.append(threading.current_thread().name)
        return real

    monkeypatch.setattr(uv.shutil, "which", lambda _: None)
    # a cert variable of the user's own: uv's release is then not asked for (CI sets one)
    monkeypatch.setenv("UV_SYSTEM_CERTS", "1")
    monkeypatch.setattr(uv_package, "find_uv_bin", find)
    uv._found_uv.cache_clear()  # found afresh, as in a new process
    yield asked
    uv._found_uv.cache_clear()


def test_uv_is_found_once_before_the_resolves_start(no_uv_on_path: list[str],
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    def compile_(*_: Any, **__: Any) -> str:
        uv._uv_binary()  # as the real one does, in the thread that resolves
        return "pkg==1.0\n"

    monkeypatch.setattr(uv, "_uv", compile_)
    envs = [spec(f"e{i}") for i in range(6)]
    checks = check_environments(envs, backends={}, cache_dir=tmp_path, jobs=6)
    assert [c.resolves for c in checks] == ["yes"] * 6
    assert no_uv_on_path == [threading.main_thread().name]


def test_no_uv_anywhere_is_one_line(no_uv_on_path: list[str],
                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    def missing() -> str:
        raise uv_package._find_uv.UvNotFound("Could not find the uv binary in any of:\n - x\n")

    monkeypatch.setattr(uv_package, "find_uv_bin", missing)
    with pytest.raises(EnvBuildError, match="uv is not installed"):
        check_environments([spec("e")], backends={}, cache_dir=tmp_path)
    matrix = tmp_path / "m.yaml"
    matrix.write_text("version: 1\nenvironments:\n  e: {pins: {numpy: '1.26.4'}}\n")
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["envs", "check", "-m", str(matrix)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("harness: error: uv is not installed:"), err
    assert err.count("\n") == 1, err

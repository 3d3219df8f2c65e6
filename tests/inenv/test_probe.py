"""The stdlib hardware probe's CUDA toolkit lookup (used for cells' CUDA_HOME)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.inenv import harness_probe


def toolkit(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (root / "bin" / "nvcc").chmod(0o755)
    return root


def test_cuda_home_follows_a_symlinked_nvcc_to_its_toolkit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = toolkit(tmp_path / "cuda-12.4")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").symlink_to(real / "bin" / "nvcc")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert harness_probe.cuda_home() == str(real)


def test_behind_a_wrapper_script_the_usual_toolkit_is_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    usual = toolkit(tmp_path / "usr-local-cuda")
    (tmp_path / "bin").mkdir()  # a wrapper script, as /usr/local/bin/nvcc on this image
    (tmp_path / "bin" / "nvcc").write_text(f"#!/bin/sh\nexec {usual}/bin/nvcc \"$@\"\n")
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(harness_probe, "CUDA_ROOTS", (str(usual),))
    assert harness_probe.cuda_home() == str(usual)  # not tmp_path, torch's guess
    monkeypatch.setattr(harness_probe, "CUDA_ROOTS", ())
    assert harness_probe.cuda_home() is None  # no headers anywhere: no toolkit


def test_cuda_home_set_by_the_user_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/opt/my-cuda")
    assert harness_probe.cuda_home() == "/opt/my-cuda"

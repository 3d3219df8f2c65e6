"""A long source build says so as it goes, output to a file included (a CI log): a line when
it starts, one every interval with the elapsed time and the step it is in, one when it ends.
A real uv build of a tiny sdist whose setup.py runs a few seconds."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.matrix import BuildSetting, EnvSpec
from harness.envs import base
from harness.envs.uv import UvBackend
from tests.conftest import PY
from tests.packages import make_sdist

# The build runs a step of its own, named after a source file, for a few seconds (as a
# compiler works through one file of TE's).
SLOW_SETUP = """\
import subprocess, sys
from setuptools import setup
subprocess.run([sys.executable, "-c", "import time; time.sleep(3)", "kernels/slow_gemm.cu"],
               check=True)
setup(name="slowbuild", version="0.1", py_modules=["slowbuild"])
"""


def test_a_source_build_prints_a_line_at_its_start_each_interval_and_its_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
        ) -> None:
    folder = tmp_path / "wheels"
    folder.mkdir()
    make_sdist(folder, "slowbuild", "0.1", {"setup.py": SLOW_SETUP, "slowbuild.py": ""})
    monkeypatch.setattr(base, "BUILD_EVERY", 0.5)
    spec = EnvSpec(name="slow", origin="test", values=(), backend="uv", python=PY,
                   requirements=("slowbuild",), pins=(),
                   builds=(BuildSetting(dist="slowbuild", isolation=False,
                                        requires=("setuptools",)),),
                   find_links=(str(folder),))
    env = UvBackend(tmp_path / "cache").realize(spec)
    assert env.built
    lines = capfd.readouterr().err.splitlines()
    said = [line for line in lines if line.startswith("environment slow: ")]
    assert said[0] == ("environment slow: building slowbuild from source (the matrix's "
                       "build: setting; not built on this machine yet)"), lines
    beats = [line for line in said if "still building slowbuild from source, " in line]
    assert beats, said
    # the step: the build's own process (`python -c ... kernels/slow_gemm.cu`), by name
    assert any(line.endswith(" ... kernels/slow_gemm.cu") for line in beats), beats
    assert said[-1].startswith("environment slow: building slowbuild from source done after ")
    # Found built the second time: nothing is said.
    UvBackend(tmp_path / "cache").realize(spec)
    assert "environment slow" not in capfd.readouterr().err


def test_the_step_is_the_newest_process_under_the_build(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    marker = str(tmp_path / "venv")
    inner = "import subprocess, sys, time; time.sleep(0.2); subprocess.run([sys.executable, " \
            "'-c', 'import time; time.sleep(5)', 'src/deep/inside/step.cpp'])"
    with subprocess.Popen([sys.executable, "-c", inner, marker],
                          start_new_session=True) as proc:
        try:
            deadline = time.monotonic() + 5
            step = None
            while step is None and time.monotonic() < deadline:
                time.sleep(0.1)
                step = base.current_step([marker])
            assert step is not None and step.endswith(" ... deep/inside/step.cpp"), step
            assert base.current_step([str(tmp_path / "elsewhere")]) is None
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the build and its step

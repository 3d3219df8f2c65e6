"""Preflight (``harness envs check``): resolve for the environment's own Python and platform,
tell a resolution failure from a host this machine cannot reach, and over the whole default
matrix."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.matrix import EnvSpec
from harness.envs.preflight import DEFAULT_PLATFORM, resolve_env, summary, unreachable_host
from tests.conftest import ROOT, WHEELHOUSE, needs_wheelhouse, report_line

# uv 0.13's words, as printed on this machine for an index and a git source it cannot reach.
NO_INDEX = """\
error: Request failed after 3 retries in 8.6s
  cause: Failed to fetch: https://download.pytorch.org/whl/cu118/torch/
  cause: error sending request for url (https://download.pytorch.org/whl/cu118/torch/)
  cause: dns error
  cause: failed to lookup address information: Name or service not known
"""
NO_GIT = """\
error: Failed to download and build `flashinfer-python @ git+https://github.com/kvcache-ai/x@fd94393`
  cause: Git operation failed
  cause: failed to fetch branch, tag, or commit `fd94393`
         fatal: unable to access 'https://github.com/k/x/': Could not resolve host: github.com
"""
NO_SOLUTION = """\
error: No solution found when resolving dependencies:
  cause: Because there is no version of torch==0.0.1 and you require torch==0.0.1, we can \
conclude that your requirements are unsatisfiable.
"""


def env(name: str, *requirements: str, python: str = "3.10") -> EnvSpec:
    return EnvSpec(name=name, origin="test", values=(), backend="uv", python=python,
                   requirements=requirements, pins=())


@pytest.mark.parametrize(("text", "host"), [
    (NO_INDEX, "download.pytorch.org"), (NO_GIT, "github.com"), (NO_SOLUTION, None)])
def test_unreachable_host_is_told_from_a_resolution_failure(text: str, host: str | None) -> None:
    assert unreachable_host(text) == host


def test_resolves_for_the_environments_python_not_the_harnesses(tmp_path: Path) -> None:
    # numpy 2.3 dropped Python 3.10: asked for 3.10, the resolver must refuse it even though
    # the harness itself runs on a newer Python.
    ok = resolve_env(env("np", "numpy<2.3"), cache_dir=tmp_path, platform=DEFAULT_PLATFORM)
    assert (ok.resolves, ok.reason) == ("yes", "")
    assert ok.packages >= 2  # numpy and pytest's own dependencies
    bad = resolve_env(env("np", "numpy==2.3.0"), cache_dir=tmp_path, platform=DEFAULT_PLATFORM)
    assert bad.resolves == "no" and bad.unreachable is None
    assert "numpy==2.3.0" in bad.reason and "Python" in bad.reason
    assert "failed for np" not in bad.reason  # uv's own words, the table names the environment


def test_a_host_that_cannot_be_reached_is_not_a_resolution_failure(tmp_path: Path) -> None:
    check = resolve_env(env("git", "pkg @ git+https://nowhere.invalid/o/pkg@abc"),
                        cache_dir=tmp_path, platform=DEFAULT_PLATFORM)
    assert check.resolves == "unreachable", check.reason
    assert check.unreachable == "nowhere.invalid"
    assert check.reason == "needs nowhere.invalid, which this machine cannot reach"
    assert check.ok and "1 need a host this machine cannot reach (nowhere.invalid)" in summary(
        [check])


@pytest.mark.slow
@needs_wheelhouse
def test_the_whole_default_matrix_resolves(tmp_path: Path) -> None:
    """CI's resolve check: every environment of matrix.yaml, with the wheelhouse standing in
    for the ktransformers fork. Only hosts this machine cannot reach may stop one."""
    cache = os.environ.get("HARNESS_TEST_CACHE") or str(tmp_path / "cache")
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "envs", "check", "--format", "json",
         "--find-links", str(WHEELHOUSE)], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "HARNESS_CACHE_DIR": cache}, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    failed = {n: c["reason"] for n, c in checks.items() if c["resolves"] == "no"}
    assert failed == {}
    unreachable = {c["unreachable"] for c in checks.values() if c["resolves"] != "yes"}
    assert unreachable <= {"github.com", "download.pytorch.org"}
    assert checks["ktransformers-0.2.4-flashinfer"]["resolves"] == "yes"
    assert checks["transformerlens:transformer_lens=1.13.0"]["resolves"] == "yes"


OLD_TL_PINS = f"""\
version: 1
cases_dir: {ROOT / 'cases'}
environments:
  tl-as-it-was:      # the transformerlens matrix before pyarrow<20 and typeguard were pinned
    python: "3.11"
    hardware: [sm_90]
    cuda: "12.1"
    packages: ["torch==2.1.2", "transformers==4.36.2", "numpy<2", "transformer-lens==1.13.0"]
"""


@pytest.mark.slow
def test_transformerlens_builds_and_imports_here_and_did_not_before(tmp_path: Path) -> None:
    """CI's build check, on the slice that fits its time: a CUDA torch installs and imports
    without a GPU, so the TransformerLens environment is proven here, not first on a GPU."""
    cache = os.environ.get("HARNESS_TEST_CACHE") or str(tmp_path / "cache")
    (tmp_path / "old.yaml").write_text(OLD_TL_PINS)

    def check(*args: str) -> dict[str, dict[str, object]]:
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "envs", "check", "--build", "--format", "json",
             *args], cwd=ROOT, capture_output=True, text=True, timeout=2400, check=False,
            env={**os.environ, "HARNESS_CACHE_DIR": cache})
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        return {c["name"]: c for c in json.loads(proc.stdout)}

    now = check("--env", "transformerlens:transformer_lens=1.13.0")
    assert [(c["resolves"], c["builds"], c["imports"]) for c in now.values()] == [
        ("yes", "yes", "yes")]
    before = check("-m", str(tmp_path / "old.yaml"))["tl-as-it-was"]
    assert (before["builds"], before["imports"]) == ("yes", "no")
    assert "pyarrow requires NumPy 2.0 or newer" in str(before["reason"])
    report_line("transformerlens:transformer_lens=1.13.0: resolves, builds, imports; with the "
                f"old pins it did not import: {str(before['reason']).split(': ', 1)[-1]}")


def test_a_message_wrapped_to_the_terminals_width_still_names_its_host() -> None:
    wrapped = NO_GIT.replace("Could not resolve host", "Could not\n         resolve host")
    assert unreachable_host(wrapped) == "github.com"


def test_skip_build_resolves_but_does_not_build_what_builds_that_dist(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """flash-attn 2 compiles for every architecture its setup.py names (hours on two cores):
    `--skip-build flash-attn` leaves those environments resolved and says why, and builds
    the others."""
    from harness.core.matrix import BuildSetting
    from harness.envs import preflight

    built: list[str] = []

    class Backend:
        checks_imports = True

        def realize(self, spec: EnvSpec) -> None:
            built.append(spec.name)

    monkeypatch.setattr(preflight, "resolve_env", lambda e, **_: preflight.EnvCheck(
        name=e.name, backend=e.backend, resolves="yes"))
    fa = EnvSpec(name="fa", origin="t", values=(), backend="uv", python="3.11",
                 requirements=("flash-attn==2.5.8",), pins=(),
                 builds=(BuildSetting(dist="flash-attn", isolation=False),))
    checks = preflight.check_environments(
        [fa, env("plain", "six")], backends={"uv": Backend()},  # type: ignore[dict-item]
        cache_dir=tmp_path, build=True, skip_builds=frozenset({"flash-attn"}))
    assert built == ["plain"]
    assert (checks[0].builds, checks[0].ok) == ("skipped", True)
    assert checks[0].reason == "not built here (--skip-build flash-attn): built from source"
    assert summary(checks).endswith("; 1 not built (--skip-build)")


def test_skip_build_of_a_dist_nothing_builds_is_one_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", "envs", "check", "--build",
                           "--skip-build", "flash_atn"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "harness: error: --skip-build flash-atn: no environment builds it from source (built: "
        "flash-attn, transformer-engine, transformer-engine-torch)"]


def test_ctrl_c_during_a_resolve_leaves_nothing_uv_started(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """An sdist's setup.py that uv runs for its metadata ends with the resolve on Ctrl-C."""
    import signal

    import psutil

    from harness.envs import uv

    pid_file = tmp_path / "setup.pid"  # a stand-in uv: a setup.py running, then Ctrl-C
    fake = tmp_path / "uv"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pid_file}\nsleep 1\n"
                    "kill -USR1 $PPID\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setattr(uv, "_uv_binary", lambda: str(fake))
    monkeypatch.setenv("UV_SYSTEM_CERTS", "1")  # uv's release is not asked for

    def ctrl_c(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            resolve_env(env("sdist", "pkg"), cache_dir=tmp_path, platform=DEFAULT_PLATFORM)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    setup = int(pid_file.read_text())

    def running() -> bool:
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(setup).status() != psutil.STATUS_ZOMBIE
        return False

    deadline = time.monotonic() + 10
    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running()


def test_an_environment_on_a_python_the_harness_cannot_run_cells_on_does_not_pass(
        tmp_path: Path) -> None:
    """It resolved ('yes'), then every cell of the run failed."""
    check = resolve_env(env("old", "six", python="3.8"), cache_dir=tmp_path,
                        platform=DEFAULT_PLATFORM)
    assert (check.resolves, check.reason) == (
        "no", "old: Python 3.8: the harness runs cells on Python 3.9 or newer")

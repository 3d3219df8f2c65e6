"""uv is told to trust the system's certificates under the name its release reads (never
both, never over the user's own), and a failure's reason is uv's error, not a warning."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.core.errors import EnvBuildError
from harness.core.matrix import EnvSpec
from harness.envs import uv
from harness.envs.preflight import first_lines

SPEC = EnvSpec(name="nowhere", origin="test", values=(), backend="uv", python="3.11",
               requirements=("no-such-package-anywhere==1.0",), pins=())


@pytest.mark.parametrize(("version", "variable"), [
    ((0, 13, 9), "UV_SYSTEM_CERTS"), ((0, 13), "UV_SYSTEM_CERTS"), ((1, 0, 0), "UV_SYSTEM_CERTS"),
    ((0, 12, 4), "UV_NATIVE_TLS"), ((0, 9, 5), "UV_NATIVE_TLS"), ((), "UV_NATIVE_TLS"),
])
def test_the_variable_follows_the_release(version: tuple[int, ...], variable: str) -> None:
    assert uv.certificate_variable(version) == variable


def test_the_release_is_read_from_uv_itself(tmp_path: Path) -> None:
    fake = tmp_path / "uv"
    fake.write_text("#!/bin/sh\necho 'uv 0.12.3 (abc 2025-01-01)'\n")
    fake.chmod(0o755)
    assert uv.uv_version(str(fake)) == (0, 12, 3)
    real = uv.uv_version(uv._uv_binary())
    said = subprocess.run([uv._uv_binary(), "--version"], capture_output=True, text=True,
                          check=True).stdout
    assert said.startswith("uv " + ".".join(map(str, real)))


def test_one_variable_is_set_for_the_uv_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UV_SYSTEM_CERTS", raising=False)
    monkeypatch.delenv("UV_NATIVE_TLS", raising=False)
    env = uv.uv_environ()
    chosen = uv.certificate_variable(uv.uv_version(uv._uv_binary()))
    assert env[chosen] == "1"
    assert [name for name in uv.CERT_VARIABLES if name in env] == [chosen]


@pytest.mark.parametrize("name", ["UV_SYSTEM_CERTS", "UV_NATIVE_TLS"])
def test_the_users_own_setting_is_kept_and_no_other_added(monkeypatch: pytest.MonkeyPatch,
                                                          name: str) -> None:
    monkeypatch.delenv("UV_SYSTEM_CERTS", raising=False)
    monkeypatch.delenv("UV_NATIVE_TLS", raising=False)
    monkeypatch.setenv(name, "0")
    env = uv.uv_environ()
    assert env[name] == "0"
    assert [n for n in uv.CERT_VARIABLES if n in env] == [name]


def test_uv_run_as_the_harness_runs_it_warns_of_nothing(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.delenv("UV_SYSTEM_CERTS", raising=False)
    monkeypatch.delenv("UV_NATIVE_TLS", raising=False)
    reqs = tmp_path / "requirements.in"
    reqs.write_text("no-such-package-anywhere==1.0\n")
    proc = subprocess.run([uv._uv_binary(), "pip", "compile", str(reqs), "--offline",
                           "--no-index"], capture_output=True, text=True, check=False,
                          env=uv.uv_environ(), timeout=120)
    assert proc.returncode != 0 and "error:" in proc.stderr
    assert "warning:" not in proc.stderr, proc.stderr


def test_a_failures_reason_is_uvs_error_not_its_warning(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    # The user's own UV_NATIVE_TLS: uv 0.13 warns that it is deprecated, before the error.
    monkeypatch.setenv("UV_NATIVE_TLS", "1")
    monkeypatch.delenv("UV_SYSTEM_CERTS", raising=False)
    reqs = tmp_path / "requirements.in"
    reqs.write_text("no-such-package-anywhere==1.0\n")
    with pytest.raises(EnvBuildError) as exc:
        uv._uv(["pip", "compile", str(reqs), "--offline", "--no-index"], SPEC)
    first = str(exc.value).splitlines()[0]
    assert first.startswith("uv pip failed for nowhere: error: "), first
    assert "warning" not in str(exc.value)


def test_the_error_line_comes_first_and_the_end_after_it() -> None:
    stderr = ("warning: The `UV_NATIVE_TLS` environment variable is deprecated and will be "
              "removed in a future release. Use `UV_SYSTEM_CERTS` instead.\n"
              "Using Python 3.11.7 environment at: /venv\n"
              "error: Failed to build `te==1.0`\n"
              + "".join(f"  line {i}\n" for i in range(10)))
    assert uv.uv_error(stderr).splitlines() == [
        "error: Failed to build `te==1.0`", "  line 5", "  line 6", "  line 7", "  line 8",
        "  line 9"]
    assert uv.uv_error("warning: x\nsomething broke\n") == "something broke"
    assert first_lines(stderr, 1) == "Using Python 3.11.7 environment at: /venv"

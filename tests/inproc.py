"""`harness ...` in this process through ``harness.cli.main``: for a test of a command's output
and exit code that is not about the process itself (signals, kill -9, a tty), without an
interpreter's start-up and imports per call."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.cli import main


@dataclass(frozen=True)
class Ran:
    """What a ``subprocess.run`` of the command would have given."""

    returncode: int
    stdout: str
    stderr: str


def harness_main(capsys: pytest.CaptureFixture[str], *args: str, cwd: Path,
                 env: Mapping[str, str] | None = None) -> Ran:
    """``harness ARGS`` run from ``cwd`` with ``env`` added to the environment; the SIGTERM
    handler ``main`` installs is put back, so the test process stays as it was."""
    before = signal.getsignal(signal.SIGTERM)
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        try:
            code = main(list(args))
        finally:
            signal.signal(signal.SIGTERM, before)
    said = capsys.readouterr()
    return Ran(code, said.out, said.err)

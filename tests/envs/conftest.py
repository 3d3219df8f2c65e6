"""What every test of the environment backends starts and ends with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.envs.uv import find_interpreter


@pytest.fixture(autouse=True)
def _interpreters_asked_afresh() -> Iterator[None]:
    """``find_interpreter`` keeps its answers for the process: a test that points PYENV_ROOT
    at a folder of its own, or fakes uv, leaves nothing behind for the next."""
    find_interpreter.cache_clear()
    yield
    find_interpreter.cache_clear()

"""A case that declares its own retries: the environment has none."""

from __future__ import annotations

import os
from pathlib import Path

from harness_case import Case

CASE = Case(failure="fails on its first try only", retries=1)


def test_flaky_once() -> None:
    """Fails the first time it runs (the flag file does not exist yet), passes after."""
    flag = Path(os.environ["FLAKY_FLAG"])
    first = not flag.exists()
    flag.write_text("failed once")
    assert not first, "first try fails"

from __future__ import annotations

from harness.core.words import plural


def test_one_is_singular_and_every_other_count_plural() -> None:
    assert [plural(n, "cell") for n in (0, 1, 2)] == ["0 cells", "1 cell", "2 cells"]

"""Case collection refused in one line that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.plan.cases import collect_cases


def test_a_collection_that_exits_without_a_word_says_how_it_ended(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "cases do not collect:" and nothing after the colon."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_x.py").write_text("import os\nos._exit(4)\n")
    with pytest.raises(UsageError, match=r"cases do not collect: pytest exited 4 and said "
                                         r"nothing$"):
        collect_cases(tmp_path)

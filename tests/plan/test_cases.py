"""Case collection refused in one line that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.plan import cases
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


def test_a_module_that_hangs_at_import_ends_the_collection_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`harness plan` waited for it forever."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cases, "DEFAULT_TIMEOUT", 3)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_ok.py").write_text("def test_a() -> None:\n    pass\n")
    (tmp_path / "test_hang.py").write_text("import time\n\ntime.sleep(3600)\n")
    with pytest.raises(UsageError) as exc:
        collect_cases(tmp_path)
    assert str(exc.value) == (f"{tmp_path}: cases do not collect in 3 s: "
                              f"{tmp_path / 'test_hang.py'}:3 was still running")

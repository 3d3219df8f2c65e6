"""The merge's log links, made on a thread of their own: all there on close, or an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.records.merge import _Linker


def test_every_link_is_in_place_when_close_returns(tmp_path: Path) -> None:
    (tmp_path / "shard" / "logs").mkdir(parents=True)
    linker = _Linker()
    for i in range(500):
        src = tmp_path / "shard" / "logs" / f"{i}.log"
        src.write_text(f"log {i}")
        linker.link(str(src), str(tmp_path / "merged" / "logs" / f"{i}.log"))  # folder made
    linker.close()
    assert sorted(p.read_text() for p in (tmp_path / "merged" / "logs").iterdir()) == sorted(
        f"log {i}" for i in range(500))
    assert not linker.thread.is_alive()


def test_a_link_that_cannot_be_made_is_raised_by_close(tmp_path: Path) -> None:
    src = tmp_path / "a.log"
    src.write_text("a")
    (tmp_path / "merged").write_text("a file where the logs' folder should go")
    linker = _Linker()
    linker.link(str(src), str(tmp_path / "merged" / "logs" / "a.log"))
    with pytest.raises(OSError):  # NotADirectoryError
        linker.close()

"""The merge's log links, made in a process of their own (or on a thread, where there is no
fork): all there on close, or an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.records.merge import _Linker


@pytest.fixture(params=["process", "thread"])
def linker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> _Linker:
    if request.param == "thread":
        monkeypatch.delattr(os, "fork")
    made = _Linker()
    assert (made.thread is None) == (request.param == "process")
    return made


def test_every_link_is_in_place_when_close_returns(tmp_path: Path, linker: _Linker) -> None:
    (tmp_path / "shard" / "logs").mkdir(parents=True)
    for i in range(5000):  # more than a pipe holds at once
        src = tmp_path / "shard" / "logs" / f"{i}\n.log"  # any name a file may have
        src.write_text(f"log {i}")
        linker.link(str(src), str(tmp_path / "merged" / "logs" / f"{i}\n.log"))  # folder made
    linker.link(str(src), str(tmp_path / "merged" / "logs" / f"{i}\n.log"))  # there: kept
    linker.close()
    assert sorted(p.read_text() for p in (tmp_path / "merged" / "logs").iterdir()) == sorted(
        f"log {i}" for i in range(5000))
    if linker.thread is not None:
        assert not linker.thread.is_alive()
    else:
        with pytest.raises(ChildProcessError):  # reaped
            os.waitpid(linker.pid, 0)


def test_a_link_that_cannot_be_made_is_raised_by_close(tmp_path: Path, linker: _Linker
                                                       ) -> None:
    src = tmp_path / "a.log"
    src.write_text("a")
    (tmp_path / "merged").write_text("a file where the logs' folder should go")
    linker.link(str(src), str(tmp_path / "merged" / "logs" / "a.log"))
    linker.link(str(src), str(tmp_path / "b.log"))  # after the error: not made
    with pytest.raises(NotADirectoryError):
        linker.close()
    assert not (tmp_path / "b.log").exists()


def test_a_linker_closed_without_links_ends(linker: _Linker) -> None:
    linker.close()

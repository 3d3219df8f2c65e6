"""Atomic writes: a reader sees the old file or the new one; a failure leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import atomic


def test_a_write_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text("old")
    atomic.write_text(path, "new")
    atomic.write_bytes(tmp_path / "log", b"\x00bytes")
    assert path.read_text() == "new" and (tmp_path / "log").read_bytes() == b"\x00bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log", "run.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "outcomes.tsv"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic.replacing(path, text=True) as fh:
        fh.write("half of the new")
        raise RuntimeError("killed mid-write")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["outcomes.tsv"]


def test_a_link_is_replaced_in_one_step(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    link = tmp_path / "latest"
    atomic.point_link(link, "one")
    atomic.point_link(link, "two")
    assert str(link.readlink()) == "two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "one", "two"]

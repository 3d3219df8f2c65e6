"""A project's files as a local simple index (PEP 691 JSON or PEP 503 HTML) and a
--find-links folder list them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.matrix.releases import IndexFile, project_files


@pytest.fixture(autouse=True)
def no_default_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", (tmp_path / "nowhere").as_uri())


def test_a_json_page_is_read_before_an_html_one(tmp_path: Path) -> None:
    page = tmp_path / "simple" / "torch"
    page.mkdir(parents=True)
    (page / "index.json").write_text(json.dumps({"files": [
        {"filename": "torch-2.5.1-cp311-cp311-linux_x86_64.whl", "yanked": "broken",
         "requires-python": ">=3.9"}]}))
    (page / "index.html").write_text('<a href="x/torch-1.0.0.tar.gz">torch-1.0.0.tar.gz</a>')
    assert project_files("Torch", indexes=[(tmp_path / "simple").as_uri()]) == [
        IndexFile("torch-2.5.1-cp311-cp311-linux_x86_64.whl", yanked=True,
                  requires_python=">=3.9")]
    (page / "index.json").write_text("{}")
    with pytest.raises(UsageError, match="not a simple API page"):
        project_files("torch", indexes=[(tmp_path / "simple").as_uri()])


def test_an_html_page_gives_each_anchor_unescaped_and_a_missing_project_none(
        tmp_path: Path) -> None:
    page = tmp_path / "simple" / "flash-attn"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        '<a href="../../f/flash_attn-2.6.3.tar.gz#sha256=ab" data-requires-python="&lt;3.12"'
        ' data-yanked="">flash_attn-2.6.3.tar.gz</a>\n<a href="">empty</a>\n')
    simple = (tmp_path / "simple").as_uri()
    assert project_files("flash_attn", indexes=[simple]) == [
        IndexFile("flash_attn-2.6.3.tar.gz", yanked=True, requires_python="<3.12")]
    assert project_files("numpy", indexes=[simple]) == []


def test_find_links_folders_are_read_even_offline(tmp_path: Path) -> None:
    (tmp_path / "torch-2.5.1-cp311-cp311-linux_x86_64.whl").write_text("")
    (tmp_path / "torchvision-0.20.1-cp311-cp311-linux_x86_64.whl").write_text("")
    files = project_files("torch", find_links=[str(tmp_path)], offline=True)
    assert files == [IndexFile("torch-2.5.1-cp311-cp311-linux_x86_64.whl")]
    with pytest.raises(UsageError, match=r"--find-links .*missing"):
        project_files("torch", find_links=[str(tmp_path / "missing")], offline=True)

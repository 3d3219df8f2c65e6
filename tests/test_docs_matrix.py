"""docs/matrix.md documents every key the loader accepts: the keys are read from the loader's
own refusal of an unknown key in each section, so a key added to the loader and not to the page
fails here. The README's example matrix loads."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import SpecError
from harness.matrix.load import load_matrix
from harness.matrix.reader import Source
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "matrix.md"
ENV = "environments:\n  e: {backend: host}\n"
#: Per section, a matrix whose only fault is an unknown key `bogus` there.
SECTIONS = {
    "top level": "version: 1\nbogus: 1\n" + ENV,
    "defaults": "version: 1\ndefaults: {bogus: 1}\n" + ENV,
    "a matrix entry": "version: 1\nmatrices:\n  m: {bogus: 1, axes: {torch: ['2.0.1']}}\n",
    "a named environment": "version: 1\nenvironments:\n  e: {bogus: 1}\n",
    "a release query": "version: 1\nmatrices:\n  m: {axes: {torch: {bogus: 1}}}\n",
    "build": "version: 1\nbuild:\n  flash-attn: {bogus: 1}\n" + ENV,
    "expect": "version: 1\n" + ENV + "expect:\n  - {bogus: 1, outcome: PASS, why: x}\n",
    "suites": "version: 1\nsuites:\n  s: {path: tests, bogus: 1}\n" + ENV,
}


def accepted(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The keys the loader allows where it refuses `bogus` in this matrix (its own list, read
    as it checks: its one-line message is cut at 200 characters)."""
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    checked = Source.mapping
    refused_with: list[set[str]] = []

    def mapping(self: Source, where: Any, allowed: set[str] | None, **kw: Any) -> Any:
        try:
            return checked(self, where, allowed, **kw)
        except SpecError:
            refused_with.append(set(allowed or ()))
            raise

    monkeypatch.setattr(Source, "mapping", mapping)
    with pytest.raises(SpecError, match="unknown key 'bogus'"):
        load_matrix(path, releases=None)
    return refused_with[0]


@pytest.mark.parametrize("section", SECTIONS)
def test_every_key_the_loader_accepts_is_documented(tmp_path: Path, section: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    keys = sorted(accepted(tmp_path, SECTIONS[section], monkeypatch))
    assert len(keys) >= 5
    page = PAGE.read_text(encoding="utf-8")
    missing = [k for k in keys if f"`{k}`" not in page]
    assert not missing, f"docs/matrix.md does not document {section} keys {missing}"


def test_the_readme_matrix_loads(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = re.search(r"^```yaml\n(version: 1\n.*?)^```", readme, re.S | re.M)
    assert example is not None and example.group(1).count("\n") <= 20
    path = tmp_path / "matrix.yaml"
    path.write_text(example.group(1))
    (tmp_path / "cases").symlink_to(ROOT / "cases")
    spec = load_matrix(path, releases=None)
    assert {"llmfoundry-0.3.0"} < {env.name for env in spec.environments}

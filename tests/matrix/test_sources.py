"""--find-links: a local wheel stands in for a package the matrix names by URL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.errors import UsageError
from harness.matrix.load import parse_matrix
from harness.matrix.sources import (
    find_links_folders,
    offline_from_environment,
    wheels_by_name,
    with_find_links,
)
from tests.packages import make_wheel

MATRIX = """\
version: 1
environments:
  fork:
    packages: ["ninja", "flashinfer-python[jit] @ git+https://github.com/o/fork@fd94393"]
  boxed:
    backend: docker
    packages: ["flashinfer-python @ git+https://github.com/o/fork@fd94393"]
"""


def test_a_url_requirement_is_installed_from_a_local_wheel_of_it(tmp_path: Path) -> None:
    make_wheel(tmp_path, "flashinfer-python", "0.2.3", {"flashinfer/__init__.py": ""})
    spec = parse_matrix(MATRIX, file="matrix.yaml", base=tmp_path)
    swapped = with_find_links(spec, (tmp_path,))
    fork, boxed = swapped.environments
    wheel = tmp_path / "flashinfer_python-0.2.3-py3-none-any.whl"
    assert fork.requirements == ("ninja", f"flashinfer-python[jit] @ {wheel.as_uri()}")
    assert fork.find_links == (str(tmp_path),)
    # Another source is another environment: it must not reuse the git build's venv.
    assert fork.key != spec.environments[0].key
    # A container cannot see this machine's folder: docker environments are left as written.
    assert boxed == spec.environments[1]


def test_without_folders_nothing_changes(tmp_path: Path) -> None:
    spec = parse_matrix(MATRIX, file="matrix.yaml", base=tmp_path)
    assert with_find_links(spec, ()) is spec


def test_the_newest_wheel_of_a_name_wins(tmp_path: Path) -> None:
    for version in ("0.2.3", "0.10.0", "0.9.1"):
        make_wheel(tmp_path, "flashinfer-python", version, {"flashinfer/__init__.py": ""})
    (tmp_path / "not-a-wheel.whl").write_text("")
    assert wheels_by_name((tmp_path,), "3.11")["flashinfer-python"].name == (
        "flashinfer_python-0.10.0-py3-none-any.whl")


def test_only_a_wheel_that_installs_on_the_environments_python_is_taken(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "fork", "1.0", {"fork/__init__.py": ""})
    wheel.rename(tmp_path / "fork-1.0-cp310-cp310-linux_x86_64.whl")
    assert wheels_by_name((tmp_path,), "3.11") == {}
    assert list(wheels_by_name((tmp_path,), "3.10")) == ["fork"]


def test_a_wheel_built_for_another_platform_is_not_taken(tmp_path: Path) -> None:
    # The same release for an ARM Mac sorts first; the local backends install on this machine.
    wheel = make_wheel(tmp_path, "fork", "1.0", {"fork/__init__.py": ""})
    wheel.rename(tmp_path / "fork-1.0-cp310-cp310-macosx_11_0_arm64.whl")
    assert wheels_by_name((tmp_path,), "3.10") == {}
    make_wheel(tmp_path, "fork", "1.0", {"fork/__init__.py": ""})
    assert wheels_by_name((tmp_path,), "3.10")["fork"].name == "fork-1.0-py3-none-any.whl"


def test_the_swap_keeps_markers_and_changes_only_environments_it_touches(tmp_path: Path) -> None:
    make_wheel(tmp_path, "flashinfer-python", "0.2.3", {"flashinfer/__init__.py": ""})
    text = MATRIX + """\
  plain:
    packages: ["six==1.16.0"]
  marked:
    packages: ["flashinfer-python @ git+https://github.com/o/fork@fd94393 ; python_version>'3'"]
"""
    spec = parse_matrix(text, file="matrix.yaml", base=tmp_path)
    swapped = with_find_links(spec, (tmp_path,))
    plain, marked = swapped.environments[2:]
    assert plain.key == spec.environments[2].key  # nothing swapped: same key, no rebuild
    assert plain.find_links == (str(tmp_path),)  # but the folder is there to install from
    wheel = tmp_path / "flashinfer_python-0.2.3-py3-none-any.whl"
    assert marked.requirements == (f'flashinfer-python @ {wheel.as_uri()} ; python_version > "3"',)


def test_folders_come_from_the_flag_and_the_environment(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.setenv("HARNESS_FIND_LINKS", f"{b}:{a} http://127.0.0.1:8000/wheels")
    assert find_links_folders((a, "https://example.com/w/")) == (
        str(a.resolve()), "https://example.com/w/", str(b.resolve()),
        "http://127.0.0.1:8000/wheels")
    with pytest.raises(UsageError, match=r"--find-links .*missing: not a folder, nor an http"):
        find_links_folders((tmp_path / "missing",))
    # A bad one from the variable was said to be --find-links, which the user never gave.
    monkeypatch.setenv("HARNESS_FIND_LINKS", str(tmp_path / "gone"))
    with pytest.raises(UsageError, match=r"^HARNESS_FIND_LINKS .*gone: not a folder, nor an"):
        find_links_folders((a,))


@pytest.mark.parametrize(("flag", "variable", "said"), [
    ("Bad Reg", None, "--registry 'Bad Reg': not HOST"),
    (None, "Bad Reg", "HARNESS_REGISTRY 'Bad Reg': not HOST")])
def test_a_bad_registry_names_where_it_came_from(monkeypatch: pytest.MonkeyPatch,
                                                 flag: str | None, variable: str | None,
                                                 said: str) -> None:
    if variable:
        monkeypatch.setenv("HARNESS_REGISTRY", variable)
    spec = parse_matrix("version: 1\nenvironments:\n  e: {backend: host}\n", file="m.yaml",
                        base=Path())
    with pytest.raises(UsageError, match=f"^{re.escape(said)}"):
        with_find_links(spec, (), registry=flag)


@pytest.mark.parametrize(("value", "offline"), [
    ("", False), ("0", False), ("false", False), ("No", False), ("off", False),
    ("1", True), ("true", True), ("yes", True)])
def test_harness_offline_reads_as_uv_offline_does(monkeypatch: pytest.MonkeyPatch, value: str,
                                                 offline: bool) -> None:
    """HARNESS_OFFLINE=false turned offline mode on."""
    monkeypatch.setenv("HARNESS_OFFLINE", value)
    assert offline_from_environment(False) is offline

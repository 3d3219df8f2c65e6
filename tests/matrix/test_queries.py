"""Axes that follow the index: a query in matrix.yaml, resolved against a real index (a
folder laid out as one, and one served over HTTP on loopback), kept in the lock."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.core.errors import SpecError, UsageError
from harness.matrix.load import load_matrix
from harness.matrix.releases import Releases, lock_path, machine_platform
from tests.conftest import served as serving

TAG = {"linux_x86_64": "manylinux_2_17_x86_64"}.get(machine_platform(), machine_platform())

MATRIX = """\
version: 1
defaults: {python: "3.11"}
matrices:
  cpu:
    axes:
      torch:
        releases: ">=2.0"
        when:
          "<2.2": {transformers: "4.46.3"}
      numpy: ["<2", ">=2"]
    exclude:
      - {torch: "2.1.2", numpy: ">=2"}
"""


def simple_index(root: Path, project: str, files: dict[str, dict[str, str]]) -> Path:
    """A folder laid out as a PEP 503 index: ``root/<project>/index.html``."""
    page = root / project
    page.mkdir(parents=True, exist_ok=True)
    anchors = "".join(f'<a href="../../files/{name}"'
                      + "".join(f' {k}="{v}"' for k, v in attrs.items()) + f">{name}</a>\n"
                      for name, attrs in files.items())
    (page / "index.html").write_text(f"<html><body>\n{anchors}</body></html>\n")
    return root


def torch_files(*versions: str, python: str = "cp311") -> dict[str, dict[str, str]]:
    return {f"torch-{v}-{python}-{python}-{TAG}.whl": {} for v in versions}


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = simple_index(tmp_path / "simple", "torch",
                        torch_files("1.13.1", "2.0.1", "2.1.0", "2.1.2", "2.2.2"))
    monkeypatch.setenv("UV_DEFAULT_INDEX", root.as_uri())
    for name in ("UV_INDEX_URL", "PIP_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    return root


def matrix(tmp_path: Path, text: str = MATRIX) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def names(path: Path, **kw: object) -> list[str]:
    return [e.name for e in load_matrix(path, **kw).environments]  # type: ignore[arg-type]


def test_a_query_plans_every_matching_release_and_writes_the_lock(
        tmp_path: Path, index: Path) -> None:
    path = matrix(tmp_path)
    spec = load_matrix(path)
    assert [e.name for e in spec.environments] == [
        "cpu:torch=2.0.1,numpy<2", "cpu:torch=2.0.1,numpy>=2", "cpu:torch=2.1.2,numpy<2",
        "cpu:torch=2.2.2,numpy<2", "cpu:torch=2.2.2,numpy>=2"]
    # The when: table pins what goes with each release (and stays out of the names).
    assert spec.environments[0].requirements == ("torch==2.0.1", "transformers==4.46.3",
                                                 "numpy<2")
    assert spec.environments[-1].requirements == ("torch==2.2.2", "numpy>=2")
    (resolution,) = spec.resolutions
    assert resolution.versions == ("2.0.1", "2.1.2", "2.2.2")
    lock = json.loads(lock_path(path).read_text())
    assert lock["resolutions"][0]["versions"] == ["2.0.1", "2.1.2", "2.2.2"]


def test_the_lock_answers_later_plans_until_refreshed(tmp_path: Path, index: Path) -> None:
    path = matrix(tmp_path)
    load_matrix(path)
    simple_index(index, "torch", torch_files("1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.3.0"))
    assert "cpu:torch=2.3.0,numpy<2" not in names(path)  # the lock, not the index
    releases = Releases.for_matrix(path, mode="refresh")
    assert "cpu:torch=2.3.0,numpy<2" in names(path, releases=releases)
    assert releases.changes() == ["new: torch 2.3.0 (torch>=2.0 pick=latest-patch, "
                                  "Python 3.11)"]
    assert releases.save()
    assert "cpu:torch=2.3.0,numpy<2" in names(path)


def test_offline_plans_from_the_lock_and_says_what_is_missing(
        tmp_path: Path, index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = matrix(tmp_path)
    planned = names(path)
    monkeypatch.setenv("UV_DEFAULT_INDEX", (tmp_path / "nowhere").as_uri())
    assert names(path, releases=Releases.for_matrix(path, mode="offline")) == planned
    lock_path(path).unlink()
    with pytest.raises(UsageError, match=r"torch>=2.0 pick=latest-patch \(Python 3.11\) is "
                       r"not in matrix.lock.json, and --offline asks no index: run `harness "
                       r"lock`"):
        load_matrix(path, releases=Releases.for_matrix(path, mode="offline"))


def test_offline_with_find_links_resolves_from_the_folder(tmp_path: Path, index: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in torch_files("2.0.1", "2.2.2"):
        (wheels / name).write_bytes(b"")
    path = matrix(tmp_path)
    releases = Releases.for_matrix(path, mode="offline", find_links=(str(wheels),))
    assert [r.versions for r in load_matrix(path, releases=releases).resolutions] == [
        ("2.0.1", "2.2.2")]


def test_each_python_of_an_axis_gets_the_releases_it_can_install(
        tmp_path: Path, index: Path) -> None:
    simple_index(index, "torch", {**torch_files("2.0.1", "2.1.2"),
                                  **torch_files("2.1.2", python="cp312")})
    path = matrix(tmp_path, MATRIX.replace('numpy: ["<2", ">=2"]', 'python: ["3.11", "3.12"]')
                  .replace('{torch: "2.1.2", numpy: ">=2"}', '{torch: "2.0.1", python: "3.11"}'))
    spec = load_matrix(path)
    assert [e.name for e in spec.environments] == ["cpu:torch=2.1.2,python=3.11",
                                                   "cpu:torch=2.1.2,python=3.12"]
    by_python = {r.target.python: r for r in spec.resolutions}
    assert by_python["3.12"].versions == ("2.1.2",)
    assert by_python["3.12"].left_out == (  # the plan says why 3.12 has no torch 2.0.1
        ("2.0.1", "no wheel for cp312 on linux_x86_64 (wheels only for other Pythons or "
                  "platforms)"),)


@pytest.mark.parametrize(("query", "message"), [
    ("{releases: '>=2.0', pick: newest}", "unknown pick 'newest'; expected one of: "
                                          "latest-patch, all"),
    ("{releases: 'two'}", "'two' is not a version specifier like '>=2.0,<3'"),
    ("{latest: 0}", "expected a number of minor series (1 or more), got a number (0)"),
    ("{when: {'<2.2': {torch: '2.0.1'}}}", "a when: table pins other packages, not 'torch'"),
    ("{releases: '<1'}", "torch<1 pick=latest-patch matches no release for Python 3.11"),
    ("{since: 2}", "unknown key 'since'"),
])
def test_a_bad_query_is_one_line_at_its_line(tmp_path: Path, index: Path, query: str,
                                             message: str) -> None:
    path = matrix(tmp_path, f"version: 1\nmatrices:\n  cpu:\n    axes:\n      torch: {query}\n")
    with pytest.raises(SpecError) as info:
        load_matrix(path)
    assert message in str(info.value)
    assert str(info.value).startswith(f"{path}:5") and "\n" not in str(info.value)


class _Simple(http.server.SimpleHTTPRequestHandler):
    """PEP 691 JSON for /simple/torch/, as PyPI answers; 404 for anything else."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/simple/torch":
            self.send_error(404)
            return
        body = json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": [
            {"filename": f"torch-2.5.1-cp311-cp311-{TAG}.whl", "url": "x", "hashes": {}},
            {"filename": f"torch-2.6.0-cp311-cp311-{TAG}.whl", "url": "x", "hashes": {},
             "requires-python": ">=3.9"},
            {"filename": f"torch-2.7.0-cp311-cp311-{TAG}.whl", "url": "x", "hashes": {},
             "yanked": "broken"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path, _Simple) as url:
        yield url + "simple"


def test_an_extra_index_over_http_json(tmp_path: Path, index: Path, served: str) -> None:
    path = matrix(tmp_path, "version: 1\nmatrices:\n  cpu:\n    index: ['" + served + "']\n"
                  "    axes:\n      torch: {releases: '>=2.2'}\n")
    (resolution,) = load_matrix(path).resolutions
    assert resolution.versions == ("2.2.2", "2.5.1", "2.6.0")  # both indexes count
    assert resolution.left_out == (("2.7.0", "yanked"),)
    assert resolution.target.indexes == (served,)


@pytest.mark.slow
def test_real_torch_releases_from_pypi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI as it is: torch's 2.0-2.5 series, each one's newest patch, for Python 3.11; and
    for 3.13, the releases without a cp313 wheel are left out, each said."""
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    path = matrix(tmp_path, "version: 1\nmatrices:\n  cpu:\n    axes:\n"
                  "      torch: {releases: '>=2.0,<2.6'}\n      python: ['3.11', '3.13']\n")
    spec = load_matrix(path)
    by_python = {r.target.python: r for r in spec.resolutions}
    assert by_python["3.11"].versions == ("2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1")
    assert by_python["3.13"].versions == ("2.5.1",)
    assert [v for v, _ in by_python["3.13"].left_out] == ["2.0.1", "2.1.2", "2.2.2", "2.3.1",
                                                          "2.4.1"]
    assert [e.name for e in spec.environments][-2:] == ["cpu:torch=2.5.1,python=3.11",
                                                        "cpu:torch=2.5.1,python=3.13"]


def test_lock_of_a_matrix_without_a_query_says_so_in_one_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    path = matrix(tmp_path, "version: 1\nmatrices:\n  cpu:\n    axes:\n      torch: ['2.0.1']\n")
    assert main(["lock", "-m", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{path} has no release query (an axis like torch: {{releases: '>=2.0'}}); "
                   "nothing to lock"]
    assert not lock_path(path).exists()


def test_a_linked_item_without_the_axis_key_beside_a_query_plans(tmp_path: Path,
                                                                 index: Path) -> None:
    """An item of a query's axis that leaves the axis's package out was a KeyError."""
    path = matrix(tmp_path, MATRIX.replace('        releases: ">=2.0"\n', "").replace(
        "        when:\n", '        - {transformers: "4.46.3"}\n'
        '        - releases: ">=2.2"\n          when:\n').replace('"<2.2"', '  "<2.2"'))
    assert names(path)[:2] == ["cpu:numpy<2", "cpu:numpy>=2"]


def test_a_lock_that_cannot_be_written_is_one_line(tmp_path: Path, index: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A matrix on a read-only mount, or read from a pipe (-m <(...)): an OSError traceback."""
    def read_only(path: Path, text: str) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("harness.matrix.releases.write_text", read_only)
    path = matrix(tmp_path)
    with pytest.raises(UsageError, match=r"^cannot write .*matrix.lock.json: Read-only file "
                                         r"system$"):
        load_matrix(path)

"""A maintainer's suite in a folder of its own, and a matrix that runs it on the host: the
set-up of the tests that run a suite through the CLI."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_matrix


def host_suite(tmp_path: Path, files: dict[str, str], *, args: str = "",
               timeout: int = 120) -> Path:
    """``files`` (name -> text) in ``tmp_path/suite`` beside an empty pytest.ini, run as the
    suite ``mine`` (with pytest ``args``, a YAML list's items) in one host environment; the
    matrix's path."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (suite / name).write_text(text)
    extra = f", args: [{args}]" if args else ""
    return write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\nsuites: {{mine: {{path: {suite}{extra}}}}}\n"
        "environments:\n  host: {backend: host, python: '@PY@', suites: [mine], "
        f"timeout: {timeout}}}\n"))

"""What cannot be planned is refused before anything is built: an empty matrix, and a
matrix too big, too long or too deep, counted from its lengths before a value is read."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import yaml

from harness.cli import main
from harness.core.errors import SpecError
from harness.matrix.load import Reader, load_matrix, parse_matrix
from harness.matrix.reader import load_source
from harness.plan.cells import case_counter
from tests.conftest import ROOT

HEAD = f"version: 1\ncases_dir: {ROOT / 'cases'}\n"
BUILT = AssertionError("built before it was counted")


def parse(text: str) -> object:
    return parse_matrix(text, file="m.yaml", base=ROOT, count_cases=case_counter())


@pytest.mark.parametrize(("text", "said"), [
    ("", "m.yaml: empty: a matrix names its environments under matrices: or environments:"),
    ("version: 1\n", "m.yaml: no environments: name them under matrices: or environments:"),
    # An empty section is named at its line (it had none).
    ("version: 1\nmatrices: {}\nenvironments: {}\n", "m.yaml:2: no environments"),
    ("version: 1\nenvironments:\n", "m.yaml:2: no environments"),
    # Said "no environments: name them under matrices:" of a matrix that names them.
    ("version: 1\nmatrices:\n  m:\n    axes: {numpy: ['<2']}\n    exclude: [{numpy: '<2'}]\n",
     "m.yaml:2: matrices: exclude: leaves no combination of the axes"),
])
def test_a_matrix_of_no_environment_is_refused(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as exc:
        load_matrix(path)
    assert str(exc.value).startswith(said.replace("m.yaml", str(path))), exc.value


def test_plan_and_run_refuse_an_empty_file_in_one_line(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    reports = tmp_path / "reports"
    assert main(["plan", "-m", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: /dev/null: empty:") and err.count("\n") == 1, err
    assert main(["--reports", str(reports), "run", "-m", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness: error: {empty}: empty:") and err.count("\n") == 1, err
    assert not reports.exists()  # no run folder, no report of nothing


def test_named_environments_are_counted_before_one_is_built() -> None:
    envs = "".join(f"  e{i}:\n    pins: {{numpy: '1.{i}'}}\n" for i in range(12_000))
    with mock.patch.object(Reader, "named_env", side_effect=BUILT), \
            pytest.raises(SpecError) as exc:
        parse(HEAD + "environments:\n" + envs)
    assert str(exc.value).startswith("m.yaml:3: the matrix expands to ")
    assert str(exc.value).endswith(" cells, over the limit of 100,000 (raise it with "
                                   "--max-cells)")


def test_a_long_axis_is_counted_before_a_value_is_read() -> None:
    values = ",".join(f'"1.{i}"' for i in range(40_000))
    text = HEAD + f"matrices:\n  big:\n    axes:\n      torch: [{values}]\n"
    with mock.patch.object(Reader, "_value", side_effect=BUILT), \
            pytest.raises(SpecError, match=r"^m\.yaml:3: the matrix expands to [\d,]+ cells, "
                                           r"over the limit of 100,000"):
        parse(text)
    # Past the limit on its environments alone: said of the axes, as before.
    with mock.patch.object(Reader, "_value", side_effect=BUILT), \
            pytest.raises(SpecError, match=r"^m\.yaml:5: matrices\.big\.axes: the axes cross "
                                           r"into 200,000 environments, over the limit"):
        parse(HEAD + "matrices:\n  big:\n    axes:\n      torch: [" + values + "]\n"
              "      numpy: ['1', '2', '3', '4', '5']\n")


def test_a_huge_value_is_refused_before_a_node_is_composed() -> None:
    text = HEAD + "matrices:\n  big:\n    axes:\n      torch: ['" + "x" * 1_000_000 + "']\n"
    with mock.patch.object(yaml.composer.Composer, "compose_node", side_effect=BUILT), \
            pytest.raises(SpecError) as exc:
        parse(text)
    assert str(exc.value) == ("m.yaml:6: a value of 1,000,000 characters, over the limit of "
                              "10,000")


@pytest.mark.parametrize("depth", [65, 1_000_000])
def test_deep_nesting_is_refused_before_a_node_is_composed(depth: int) -> None:
    text = "version: 1\nmatrices: " + "[" * depth + "]" * depth + "\n"
    with mock.patch.object(yaml.composer.Composer, "compose_node", side_effect=BUILT), \
            pytest.raises(SpecError) as exc:
        load_source(text, "m.yaml")
    assert str(exc.value) == "m.yaml:2: nested more than 64 levels deep"
    assert len(load_source("a: " + "[" * 63 + "]" * 63 + "\n", "m.yaml").data["a"]) == 1


def test_well_formed_text_is_composed_by_libyaml_with_its_lines() -> None:
    text = (ROOT / "matrix.yaml").read_text()
    with mock.patch.object(yaml.composer.Composer, "compose_node", side_effect=BUILT):
        source = load_source(text, "matrix.yaml")
    assert source.data["version"] == 1
    assert source.line(("matrices",)) == text.splitlines().index("matrices:") + 1
    with pytest.raises(SpecError, match=r"m\.yaml:2: matrices.a: duplicate key 'a'"):
        load_source("version: 1\nmatrices: {a: 1, a: 2}\n", "m.yaml")

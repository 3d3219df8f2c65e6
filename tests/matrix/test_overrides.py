"""``--set KEY=VALUE``: a bump without editing matrix.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import SpecError, UsageError
from harness.matrix.load import parse_matrix
from harness.matrix.overrides import parse_sets

MATRIX = """\
version: 1
matrices:
  cpu:
    axes:
      torch:
        - {torch: "2.0.1", transformers: "4.46.3"}
        - {torch: "2.5.1", transformers: "4.46.3"}
        - {torch: "2.15.0", transformers: "*"}
      numpy: ["<2", ">=2"]
  gpu:
    cuda: "12.1"
    axes:
      te: ["2.2.0", "2.8.0"]
environments:
  pinned:
    pins: {torch: "2.4.1"}
expect:
  - {environment: "cpu:torch=2.0.1*", outcome: PASS, why: a rule about a replaced release}
"""


def names(*sets: str) -> tuple[list[str], list[str]]:
    spec = parse_matrix(MATRIX, file="matrix.yaml", base=Path(), overrides=parse_sets(sets))
    return [e.name for e in spec.environments], list(spec.set_notes)


def test_an_axis_becomes_the_one_value_the_newest_row_kept() -> None:
    envs, notes = names("torch=2.6.0")
    assert envs == ["cpu:torch=2.6.0,numpy<2", "cpu:torch=2.6.0,numpy>=2",
                    "gpu:te=2.2.0", "gpu:te=2.8.0", "pinned"]
    spec = parse_matrix(MATRIX, file="m", base=Path(), overrides=(("torch", "2.6.0"),))
    # The linked row in force for 2.6.0 (2.5.1's: transformers 4.46.3, not 2.15.0's "*").
    assert spec.environments[0].requirements == ("torch==2.6.0", "transformers==4.46.3",
                                                 "numpy<2")
    later = parse_matrix(MATRIX, file="m", base=Path(), overrides=(("torch", "2.16.0"),))
    assert later.environments[0].requirements == ("torch==2.16.0", "transformers", "numpy<2")
    older = parse_matrix(MATRIX, file="m", base=Path(), overrides=(("torch", "1.13.1"),))
    assert older.environments[0].requirements == ("torch==1.13.1", "transformers==4.46.3",
                                                  "numpy<2")
    assert {e.name: e for e in spec.environments}["pinned"].requirements == ("torch==2.6.0",)
    assert notes == ["--set torch=2.6.0: replaced in matrices.cpu, environments.pinned"]
    assert spec.expect == ()  # a rule about environments the bump replaced holds for none


def test_several_keys_in_one_flag_and_a_key_named_nowhere_is_added() -> None:
    envs, notes = names("te=2.9.0,flash_attn=*")
    assert envs == ["cpu:torch=2.0.1,numpy<2,flash_attn=*", "cpu:torch=2.0.1,numpy>=2,"
                    "flash_attn=*", "cpu:torch=2.5.1,numpy<2,flash_attn=*",
                    "cpu:torch=2.5.1,numpy>=2,flash_attn=*", "cpu:torch=2.15.0,numpy<2,"
                    "flash_attn=*", "cpu:torch=2.15.0,numpy>=2,flash_attn=*",
                    "gpu:te=2.9.0,flash_attn=*", "pinned"]
    assert notes == ["--set te=2.9.0: replaced in matrices.gpu",
                     "--set flash_attn=*: named nowhere in the matrix; added to every "
                     "environment"]


def test_a_setting_is_replaced_where_it_is_set() -> None:
    spec = parse_matrix(MATRIX, file="m", base=Path(), overrides=(("cuda", "12.4"),))
    assert {e.name: e for e in spec.environments}["gpu:te=2.2.0"].cuda == "12.4"


@pytest.mark.parametrize(("given", "message"), [
    ("torch", "--set torch: expected KEY=VALUE, like torch=2.6.0"),
    ("torch=", "--set torch=: expected KEY=VALUE"),
    ("torch=2.6.0junk", "--set torch=2.6.0junk: '2.6.0junk' is not a version, a specifier, "
                        "'*' or a URL"),
])
def test_a_bad_set_is_one_line(given: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_sets([given])
    assert str(info.value).startswith(message)


def test_a_distribution_name_stands_for_its_axis_and_packages_lists_are_replaced() -> None:
    text = MATRIX.replace("version: 1\n", "version: 1\ndistributions: {te: "
                          "'transformer-engine[pytorch]'}\n").replace(
        '    cuda: "12.1"\n', '    cuda: "12.1"\n    packages: ["einops==0.8.1", "numpy<2"]\n')
    spec = parse_matrix(text, file="m", base=Path(),
                        overrides=parse_sets(["transformer-engine=2.9.0,einops=0.8.0"]))
    assert [e.requirements for e in spec.environments if e.name.startswith("gpu")] == [
        ("transformer-engine[pytorch]==2.9.0", "einops==0.8.0", "numpy<2")]
    assert list(spec.set_notes) == ["--set transformer-engine=2.9.0: replaced in matrices.gpu",
                                    "--set einops=0.8.0: replaced in matrices.gpu"]


@pytest.mark.parametrize(("text", "said"), [
    ("version: 1\nenvironments:\n  a: {pins: [x]}\n",
     "matrix.yaml:3: environments.a.pins: expected a mapping, got a list"),
    ("version: 1\nmatrices:\n  a:\n    axes: {x: ['1']}\n    include: 5\n",
     "matrix.yaml:5: matrices.a.include: include is a list of mappings, got a number (5)"),
])
def test_a_set_on_a_malformed_matrix_leaves_the_loader_its_one_line(text: str, said: str
                                                                     ) -> None:
    """It was a TypeError traceback: the bump indexed pins: [x] and iterated include: 5."""
    with pytest.raises(SpecError) as exc:
        parse_matrix(text, file="matrix.yaml", base=Path(), overrides=parse_sets(["x=2"]))
    assert str(exc.value) == said

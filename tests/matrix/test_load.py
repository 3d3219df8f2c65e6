from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import SpecError
from harness.core.matrix import short_value
from harness.matrix.load import parse_matrix, requirement_for
from tests.matrix.test_expand import GITHUB_INCLUDE_EXPANSION

GOOD = """\
version: 1
defaults: {python: "3.11"}
matrices:
  cpu:
    hardware: [cpu]
    axes:
      torch: ["2.0.1", "2.5.1"]
      numpy: ["<2", ">=2"]
"""


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_matrix(text, file="matrix.yaml", base=Path())


def error(text: str) -> str:
    with pytest.raises(SpecError) as info:
        parse(text)
    return str(info.value)


def test_good_matrix_crosses_axes_into_requirements() -> None:
    spec = parse(GOOD)
    assert [e.requirements for e in spec.environments] == [
        ("torch==2.0.1", "numpy<2"), ("torch==2.0.1", "numpy>=2"),
        ("torch==2.5.1", "numpy<2"), ("torch==2.5.1", "numpy>=2")]
    assert spec.environments[0].name == "cpu:torch=2.0.1,numpy<2"
    assert len({e.key for e in spec.environments}) == 4


@pytest.mark.parametrize(("value", "expected"), [
    ("2.1.2", "torch==2.1.2"), ("<2", "torch<2"), (">=2,<3", "torch>=2,<3"), ("*", "torch"),
    ("https://x/y.whl", "torch @ https://x/y.whl")])
def test_requirement_for(value: str, expected: str) -> None:
    assert requirement_for("torch", value) == expected


def test_url_pins_read_as_their_ref_in_names_but_stay_whole_in_requirements() -> None:
    url = "git+https://github.com/NVIDIA/TransformerEngine.git@v0.12"
    assert short_value(url) == "git@v0.12"
    assert short_value("https://x/y/torch-2.1.0.whl") == "torch-2.1.0.whl"
    commit = "git+https://github.com/NVIDIA/TransformerEngine.git@" + "434d58fa1f60" + "0" * 28
    assert short_value(commit) == "git@434d58fa1f60"
    spec = parse(GOOD.replace('torch: ["2.0.1", "2.5.1"]', f'te: ["{url}"]'))
    assert spec.environments[0].name == "cpu:te=git@v0.12,numpy<2"
    assert spec.environments[0].requirements[0] == f"te @ {url}"


def test_unknown_key_names_line_and_path() -> None:
    text = GOOD.replace("    hardware: [cpu]\n", "    hardware: [cpu]\n    axis: {}\n")
    assert error(text).startswith("matrix.yaml:6: matrices.cpu.axis: unknown key 'axis'")


def test_unquoted_version_is_a_type_error() -> None:
    text = GOOD.replace('["2.0.1", "2.5.1"]', '["2.0.1", 2.5]')
    assert error(text).startswith("matrix.yaml:7: matrices.cpu.axes.torch[1]: 2.5 is a number")


@pytest.mark.parametrize("value", ["5", "true", "1.5"])
def test_an_include_that_is_a_scalar_is_one_line(value: str) -> None:
    """It was a TypeError: 'int' object is not iterable."""
    assert error(GOOD + f"    include: {value}\n").startswith(
        "matrix.yaml:9: matrices.cpu.include: include is a list of mappings, got ")


def test_wrong_type_for_timeout() -> None:
    text = GOOD.replace('python: "3.11"', 'python: "3.11", timeout: soon')
    assert error(text) == ("matrix.yaml:2: defaults.timeout: expected a positive number of "
                           "seconds up to 604,800, got 'soon'")


def test_include_may_add_a_key_that_is_not_an_axis() -> None:
    """As in GitHub Actions: here a package pinned in the combinations it extends."""
    text = GOOD + "    include:\n      - {torch: \"2.0.1\", six: \"<2\"}\n"
    envs = parse(text).environments
    assert [("six<2" in e.requirements) for e in envs] == [True, True, False, False]


def test_exclude_naming_an_unknown_axis() -> None:
    assert "exclude names unknown axis 'cuda'" in error(GOOD + "    exclude: [{cuda: '11.8'}]\n")


def test_malformed_yaml() -> None:
    assert error(GOOD + "  gpu: [unclosed\n").startswith("matrix.yaml:10: malformed YAML")


def test_duplicate_key() -> None:
    assert error(GOOD + "  cpu: {}\n") == "matrix.yaml:9: matrices.cpu: duplicate key 'cpu'"


def test_bad_backend_lists_valid_ones() -> None:
    message = error(GOOD.replace("hardware: [cpu]", "backend: conda"))
    assert message == ("matrix.yaml:5: matrices.cpu.backend: unknown backend 'conda'; valid: "
                       "docker, host, uv")


def test_bad_hardware_target() -> None:
    assert "'h100' is not a hardware target" in error(GOOD.replace("[cpu]", "[cpu, h100]"))


def test_bad_version_value() -> None:
    message = error(GOOD.replace('"2.5.1"', '"2.x y"'))
    assert message == ("matrix.yaml:7: matrices.cpu.axes.torch[1]: '2.x y' is not a version "
                       "or specifier")


def test_an_empty_runner_list_is_refused() -> None:
    """It planned `"runs-on": []`, which GitHub refuses when the job starts."""
    assert error(GOOD + "runners:\n  cpu: []\n") == (
        "matrix.yaml:10: runners.cpu: an empty list of runner labels; name at least one")


@pytest.mark.parametrize("value", ["not a url", "download.pytorch.org/whl/cu118", "ftp://x/"])
def test_an_index_that_is_neither_a_url_nor_a_folder_is_refused(value: str) -> None:
    """It went to uv unchecked, which refused it when the environment was built."""
    text = GOOD.replace("hardware: [cpu]", f"index: [https://x/simple, {value!r}]")
    assert error(text) == (f"matrix.yaml:5: matrices.cpu.index[1]: {value!r} is not a package "
                           "index: an http(s) or file URL, or a folder that exists")


def test_an_index_may_be_a_url_or_a_folder(tmp_path: Path) -> None:
    text = GOOD.replace("hardware: [cpu]", f"index: [https://x/simple, {tmp_path.as_uri()}, "
                        f"'{tmp_path}']")
    assert parse(text).environments[0].index_urls == (
        "https://x/simple", tmp_path.as_uri(), str(tmp_path))


def test_a_bad_setting_along_an_axis_is_named_at_its_own_item() -> None:
    """As a package's value is: its index and line, not the axis's line with its name twice."""
    message = error(GOOD.replace('torch: ["2.0.1", "2.5.1"]', 'python: ["3.11",\n        "3.x"]'))
    assert message == ("matrix.yaml:8: matrices.cpu.axes.python[1]: '3.x' is not a Python "
                       "version like '3.11'")


def test_named_environment_with_pins() -> None:
    text = GOOD + ("environments:\n  lf:\n    hardware: [sm_90]\n    cuda: '11.8'\n"
                   "    pins: {torch: '2.0.1', llm-foundry: '0.3.0'}\n")
    env = {e.name: e for e in parse(text).environments}["lf"]
    assert env.requirements == ("torch==2.0.1", "llm-foundry==0.3.0")
    assert env.hardware == ("sm_90",) and env.cuda == "11.8"


def test_cli_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "matrix.yaml"
    bad.write_text(GOOD.replace("axes:", "axis:"))
    proc = subprocess.run([sys.executable, "-m", "harness", "plan", "-m", str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"{bad}:6: matrices.cpu.axis: unknown key 'axis'" in proc.stderr


BUILDS = """\
version: 1
defaults: {python: "3.11"}
distributions: {te: "transformer-engine[pytorch]"}
build:
  transformer-engine-torch:
    via: [transformer-engine]
    isolation: false
    requires: [torch, pybind11]
    env: {MAX_JOBS: "4"}
    nvcc: ">=12.0"
environments:
  te:
    pins: {torch: "2.5.1", te: "2.2.0"}
  plain:
    pins: {torch: "2.5.1"}
"""


def test_build_settings_apply_to_the_environments_that_install_the_package() -> None:
    te, plain = parse(BUILDS).environments
    (setting,) = te.builds
    assert setting.dist == "transformer-engine-torch" and not setting.isolation
    assert setting.requires == ("torch", "pybind11") and setting.nvcc == ">=12.0"
    assert setting.env == (("MAX_JOBS", "4"),)
    assert plain.builds == ()


def test_a_build_setting_changes_only_the_keys_of_environments_it_applies_to() -> None:
    before = parse(BUILDS).environments
    after = parse(BUILDS.replace('MAX_JOBS: "4"', 'MAX_JOBS: "8"')).environments
    assert before[0].key != after[0].key
    assert before[1].key == after[1].key


def test_bad_build_settings_name_their_line() -> None:
    assert error(BUILDS.replace('">=12.0"', '"twelve"')) == (
        "matrix.yaml:10: build.transformer-engine-torch.nvcc: 'twelve' is not a version "
        "specifier like '>=12.0'")
    assert error(BUILDS.replace("isolation: false", "isolation: no-way")).startswith(
        "matrix.yaml:7: build.transformer-engine-torch.isolation: expected true or false")
    assert error(BUILDS.replace("    via:", "    vias:")).startswith(
        "matrix.yaml:6: build.transformer-engine-torch.vias: unknown key 'vias'")


def test_an_index_axis_reads_as_its_last_path_part() -> None:
    """It read ``cu118',)``: the tuple's repr, cut at the last slash."""
    text = GOOD.replace('numpy: ["<2", ">=2"]', 'numpy: ["<2"]') + (
        "    include:\n      - {torch: '2.0.1', cuda: '11.8', "
        "index: ['https://download.pytorch.org/whl/cu118']}\n")
    envs = {e.name: e for e in parse(text).environments}
    values = dict(envs["cpu:torch=2.0.1,numpy<2,cuda=11.8,index=cu118"].values)
    assert values["index"] == "cu118"


def test_cuda_is_part_of_the_environment_key() -> None:
    """``cuda`` picks the Docker base image and what drift expects of torch."""
    base = "environments:\n  a:\n    backend: docker\n    pins: {torch: '2.1.2'}\n"
    plain, with_cuda, other = (parse("version: 1\n" + base + extra).environments[0]
                               for extra in ("", "    cuda: '12.1'\n", "    cuda: '11.8'\n"))
    assert len({plain.key, with_cuda.key, other.key}) == 3


def combos(text: str) -> list[dict[str, str]]:
    return [dict(e.values) for e in parse(text).environments]


def test_github_include_example_through_the_matrix() -> None:
    """GitHub's "Expanding or adding matrix configurations" example, verbatim: none of these
    keys is a package, so all are variables of the cell."""
    text = """version: 1
matrices:
  m:
    axes:
      fruit: [apple, pear]
      animal: [cat, dog]
    include:
      - color: green
      - color: pink
        animal: cat
      - fruit: apple
        shape: circle
      - fruit: banana
      - fruit: banana
        animal: cat
"""
    assert combos(text) == GITHUB_INCLUDE_EXPANSION
    first = parse(text).environments[0]
    assert first.requirements == () and ("FRUIT", "apple") in first.env_vars
    assert ("HARNESS_VARIABLES", '{"animal": "cat", "color": "pink", "fruit": "apple", '
            '"shape": "circle"}') in first.env_vars


def test_github_exclude_example_through_the_matrix() -> None:
    text = """version: 1
matrices:
  m:
    axes:
      os: [macos-latest, windows-latest]
      version: [12, 14, 16]
      environment: [staging, production]
    exclude:
      - os: macos-latest
        version: 12
        environment: production
      - os: windows-latest
        version: 16
"""
    got = combos(text)
    assert len(got) == 9
    assert {"os": "macos-latest", "version": "12", "environment": "production"} not in got
    assert not [c for c in got if c["os"] == "windows-latest" and c["version"] == "16"]


def test_github_expanding_example_and_include_after_exclude() -> None:
    text = """version: 1
matrices:
  m:
    axes:
      os: [windows-latest, ubuntu-latest]
      node: [14, 16]
    include:
      - os: windows-latest
        node: 16
        npm: 6
"""
    assert combos(text) == [
        {"os": "windows-latest", "node": "14"},
        {"os": "windows-latest", "node": "16", "npm": "6"},
        {"os": "ubuntu-latest", "node": "14"}, {"os": "ubuntu-latest", "node": "16"}]
    # "All include combinations are processed after exclude": include adds one back.
    back = text.replace("    include:", "    exclude: [{os: windows-latest, node: 16}]\n"
                        "    include:")
    assert {"os": "windows-latest", "node": "16", "npm": "6"} in combos(back)
    assert len(combos(back)) == 4


def test_a_capitalized_or_declared_axis_is_a_variable_even_with_version_values() -> None:
    text = GOOD.replace('numpy: ["<2", ">=2"]', 'TORCH_CUDA_ARCH_LIST: ["8.0", "9.0"]\n'
                        '      init_device: ["1.0"]') + "    variables: [init_device]\n"
    env = parse(text).environments[0]
    assert env.requirements == ("torch==2.0.1",)
    assert ("TORCH_CUDA_ARCH_LIST", "8.0") in env.env_vars and ("INIT_DEVICE", "1.0") in (
        env.env_vars)


@pytest.mark.parametrize("value", ["true", "false", "2", "'1'"])
def test_a_version_other_than_the_number_one_is_refused(value: str) -> None:
    # `true == 1` in Python: a boolean slipped through as version 1.
    message = error(GOOD.replace("version: 1", f"version: {value}"))
    assert message.startswith("matrix.yaml:1: version: unsupported version"), message

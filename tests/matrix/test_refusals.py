"""An oversized matrix is refused from its counts, before its environments are built, and
those counts are the plan's (or a lower bound of it, said as such)."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from harness.core.errors import SpecError, UsageError
from harness.core.matrix import CaseSelector
from harness.matrix import reader
from harness.matrix.census import CaseCount
from harness.matrix.load import Reader, parse_matrix
from harness.matrix.reader import load_source, value_limit
from harness.plan.cases import CaseVariant, collect_cases, select_cases
from harness.plan.cells import case_counter, make_plan
from tests.conftest import ROOT, examples

CASES = ROOT / "cases"
HEAD = f"version: 1\ncases_dir: {CASES}\n"


def parse(text: str, max_cells: int | None = None, count_cases: CaseCount | None = None
          ) -> Any:
    return parse_matrix(text, file="m.yaml", base=ROOT, max_cells=max_cells,
                        count_cases=count_cases)


def axis(name: str, n: int) -> str:
    return f"      {name}: [" + ", ".join(f'"1.{i}"' for i in range(n)) + "]\n"


def test_cells_past_the_limit_are_refused_before_an_environment_is_built() -> None:
    # 20,000 environments are under the limit; with three named cases on three targets
    # they make 180,000 cells at least. Building them took seconds; counting, nothing.
    text = (HEAD + "matrices:\n  big:\n    hardware: [cpu, sm_80, sm_90]\n"
            "    cases: [mergekit_fp16, probes, evo2_te_extra_state]\n    axes:\n"
            + axis("a", 200) + axis("b", 100))
    with mock.patch.object(Reader, "_env_spec", side_effect=AssertionError("built")), \
            pytest.raises(SpecError) as exc:
        parse(text)
    assert str(exc.value) == ("m.yaml:3: the matrix expands to at least 180,000 cells, over "
                              "the limit of 100,000 (raise it with --max-cells)")


def test_with_the_cases_counted_the_cells_are_counted_in_full_before_building() -> None:
    # The repository's gpu matrix with 1,000 torch versions: 8,000 environments, of 78
    # cells each (26 case variants on three targets), none built to refuse 624,000 cells.
    text = (HEAD + "matrices:\n  gpu:\n    hardware: [sm_80, sm_89, sm_90]\n"
            "    cases: [mergekit_fp16, evo2_te_extra_state, probes]\n    axes:\n"
            "      cuda: [{cuda: '11.8', index: 'https://download.pytorch.org/whl/cu118'}, "
            "{cuda: '12.1'}]\n" + axis("torch", 1000)
            + "      te: [null, '1.13.0', '2.2.0']\n      flash_attn: [null, '2.5.8']\n"
            "    exclude:\n      - {cuda: '11.8', te: '2.2.0'}\n"
            "      - {cuda: '11.8', te: '1.13.0'}\n")
    per_env = 3 * len(select_cases(cases(), tuple(
        CaseSelector(pattern=p, where="") for p in ("mergekit_fp16", "evo2_te_extra_state",
                                                     "probes"))))
    with mock.patch.object(Reader, "_env_spec", side_effect=AssertionError("built")), \
            pytest.raises(SpecError) as exc:
        parse(text, count_cases=case_counter())
    assert str(exc.value) == (f"m.yaml:3: the matrix expands to {8000 * per_env:,} cells, "
                              "over the limit of 100,000 (raise it with --max-cells)")
    # Without them, three named cases on three targets: 72,000 cells at least.
    with pytest.raises(SpecError, match="at least 72,000 cells, over the limit of 70,000"):
        parse(text, max_cells=70_000)


def test_cases_that_do_not_collect_leave_the_count_a_lower_bound(tmp_path: Path) -> None:
    text = (f"version: 1\ncases_dir: {tmp_path}\nmatrices:\n  m:\n    cases: [a, b]\n"
            "    axes:\n" + axis("a", 200) + axis("b", 300))
    with pytest.raises(SpecError, match="at least 120,000 cells"):
        parse(text, count_cases=case_counter())  # no pytest.ini: planning says so, later


def test_every_matrix_entry_counts_toward_one_limit() -> None:
    entry = ("  {}:\n    hardware: [cpu, sm_90]\n    cases: [probes, mergekit_fp16]\n"
             "    axes:\n"
             + axis("a", 150) + axis("b", 100))
    text = HEAD + "matrices:\n" + entry.format("one") + entry.format("two")
    with mock.patch.object(Reader, "_env_spec", side_effect=AssertionError("built")), \
            pytest.raises(SpecError, match=r"m\.yaml:3: the matrix expands to at least "
                                           r"120,000 cells"):
        parse(text)


def test_excluded_environments_are_not_counted() -> None:
    text = (HEAD + "matrices:\n  big:\n    axes:\n" + axis("a", 50) + axis("b", 50)
            + axis("c", 50) + "    exclude:\n      - {a: '1.0'}\n      - {a: '1.0', b: '1.1'}\n"
            "      - {b: '1.2'}\n")
    with pytest.raises(SpecError, match=r"m\.yaml:5: matrices\.big\.axes: the axes cross into "
                                        r"120,050 environments, over the limit of 100,000"):
        parse(text)  # 125,000 - 2,500 - 2,500 + 50: the first two excludes overlap
    small = (HEAD + "matrices:\n  m:\n    axes:\n" + axis("a", 10) + axis("b", 10)
             + "    exclude:\n" + "".join(f"      - {{a: '1.{i}'}}\n" for i in range(5)))
    assert len(parse(small, max_cells=50).environments) == 50  # the product alone is 100


def test_an_include_that_extends_nothing_counts_as_one_more() -> None:
    text = (HEAD + "matrices:\n  m:\n    axes:\n" + axis("a", 10)
            + "    include:\n      - {a: '1.3', extra: '2.0'}\n      - {a: '9.9'}\n")
    with pytest.raises(SpecError, match="the axes cross into 11 environments, over the limit "
                                        "of 10 cells"):
        parse(text, max_cells=10)
    assert len(parse(text, max_cells=11).environments) == 11


def test_a_huge_file_is_refused_while_it_is_read_before_a_node_is_composed() -> None:
    values = ",".join(f'"{i}"' for i in range(200_000))
    text = HEAD + f"matrices:\n  big:\n    axes:\n      a: [{values}]\n"
    with mock.patch.object(yaml.composer.Composer, "compose_node",
                           side_effect=AssertionError("composed")), \
            pytest.raises(SpecError) as exc:
        parse(text)
    assert str(exc.value) == ("m.yaml:6: more than 50,000 values, past the limit for a matrix "
                              "(raise it with --max-cells: half of it, 50,000 at least)")


def test_the_value_limit_follows_the_cell_limit_and_counts_no_key() -> None:
    assert value_limit(10) == value_limit(100_000) == 50_000
    assert value_limit(1_000_000) == 500_000
    # 900 keys with 900 values: the values alone are counted, as the converter does.
    pairs = "".join(f"k{i}: {i}\n" for i in range(900))
    assert len(load_source(pairs, "m.yaml", max_values=1000).data) == 900
    many = "a: [" + ",".join("1" for _ in range(1000)) + "]\n"
    with pytest.raises(SpecError, match=r"m\.yaml:1: more than 1,000 values"):
        load_source(many, "m.yaml", max_values=1000)
    assert len(load_source(many, "m.yaml", max_values=1002).data["a"]) == 1000


def test_without_libyaml_the_pure_python_parser_counts_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "_EVENT_LOADER", yaml.SafeLoader)

    def items(n: int) -> str:  # the mapping, the list and n items: n + 2 values
        return "a: [" + ",".join("1" for _ in range(n)) + "]\n"

    assert len(load_source(items(998), "m.yaml", max_values=1000).data["a"]) == 998
    with pytest.raises(SpecError, match=r"m\.yaml:1: more than 1,000 values"):
        load_source(items(999), "m.yaml", max_values=1000)


# --- the counts against the plan ----------------------------------------------------------

HARDWARE = ("cpu", "sm_80", "sm_90", "auto")
SELECTORS = ("mergekit_fp16", "probes", "evo2_te_extra_state", "probes", "*te*",
             "marker:gpu", "test_probes.py", "mergekit_fp16::repro")
PRESENT = ("cpu", "sm_90")


@st.composite
def matrices(draw: st.DrawFn) -> str:
    """One matrix entry: plain and linked axes (with nulls), excludes and includes over
    their values, hardware and case selectors; and sometimes a named environment."""
    version = st.sampled_from(['"1.0"', '"2.0"', '"3.0"', "null"])
    hardware = draw(st.lists(st.sampled_from(HARDWARE), min_size=1, max_size=3))
    lines = [f"    hardware: [{', '.join(hardware)}]"]
    selectors = draw(st.lists(st.sampled_from(SELECTORS), max_size=3))
    if selectors:
        lines.append(f"    cases: [{', '.join(repr(s) for s in selectors)}]")
    lines.append("    axes:")
    names = draw(st.lists(st.sampled_from(("torch", "numpy", "scipy")), min_size=1,
                          max_size=3, unique=True))
    for name in names:  # each value once: two environments of one name are an error
        values = draw(st.lists(version, min_size=1, max_size=4, unique=True))
        if name == "torch":
            values = [f"{{torch: {v}, tf: {draw(version)}}}" for v in values]
        lines.append(f"      {name}: [{', '.join(values)}]")
    keys = [*names, "tf"] if "torch" in names else names
    for what, known in (("exclude", keys), ("include", [*keys, "extra"])):
        patterns = draw(st.lists(st.dictionaries(st.sampled_from(known), version, min_size=1,
                                                 max_size=2), max_size=3))
        if patterns:
            lines.append(f"    {what}:")
            lines += ["      - {" + ", ".join(f"{k}: {v}" for k, v in p.items()) + "}"
                      for p in patterns]
    text = HEAD + "matrices:\n  m:\n" + "\n".join(lines) + "\n"
    if draw(st.booleans()):
        text += "environments:\n  solo:\n    hardware: [cpu, sm_90]\n    cases: [probes]\n"
    return text


@functools.cache
def cases() -> tuple[CaseVariant, ...]:
    return collect_cases(CASES)


def refusal(text: str, max_cells: int, count_cases: CaseCount | None = None) -> str | None:
    try:
        parse(text, max_cells=max_cells, count_cases=count_cases)
    except SpecError as exc:
        return str(exc)
    return None


def count_in(message: str) -> tuple[int, bool]:
    found = re.search(r"(at least )?([\d,]+) (environments|cells)", message)
    assert found, message
    return int(found[2].replace(",", "")), not found[1]


@settings(max_examples=examples(150), deadline=None, derandomize=True)
@given(text=matrices())
def test_the_counts_before_building_are_the_plans_or_lower_bounds_of_it(text: str) -> None:
    try:
        spec = parse(text, max_cells=10**9)
        cells = len(make_plan(spec, cases(), PRESENT).cells)
    except UsageError:  # two environments of one name, a selector matching nothing
        reject()
    envs = sum(env.origin == "matrices.m" for env in spec.environments)
    # A limit of 0: the entry is refused on its environments, counted from its axes.
    said = refusal(text, 0)
    if said is not None and "the axes cross into" in said:
        counted, exact = count_in(said)
        assert counted == envs if exact else counted <= envs
    else:  # none counted (at least): then the cells, or nothing, past a limit of 0
        assert envs == 0 or "at least" in (said or "at least")
    # A limit of the environments: refused on the cells it counts (at least), or not at all.
    said = refusal(text, envs)
    if said is not None:
        counted, exact = count_in(said)
        assert not exact and envs < counted <= cells
    # With the cases counted: the plan's count, or (auto hardware) a lower bound of it.
    counter = case_counter(lambda _: cases())
    said = refusal(text, envs, counter)
    if said is not None:
        counted, exact = count_in(said)
        assert counted == cells if exact else envs < counted <= cells
    if "auto" not in text and cells > 0:  # refused before building, on the exact count
        said = refusal(text, cells - 1, counter)
        assert said is not None
        assert count_in(said) in ((cells, True), (envs, True))
    # The exact count is the plan's own: one cell past the limit is refused, on its count.
    assert refusal(text, cells) is None
    assert refusal(text, cells, counter) is None
    if cells > 0:
        with pytest.raises(SpecError) as exc:
            make_plan(parse(text, max_cells=cells - 1), cases(), PRESENT)
        assert count_in(str(exc.value))[0] in (cells, envs)

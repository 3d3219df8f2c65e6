"""The arithmetic count of a matrix entry against the expansion it counts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.matrix.census import Count, count_combos, expand
from tests.conftest import examples

KEYS = ("a", "b", "c", "d")
VALUES = ("1", "2", "3", None)


@st.composite
def entries(draw: st.DrawFn) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]],
                                      list[dict[str, Any]]]:
    """Small axes (some linked, some repeating another axis's key, some values lacking a key
    or null), with excludes and includes over their keys and one of their own."""
    axes: dict[str, list[dict[str, Any]]] = {}
    for name in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True)):
        keys = st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True)
        linked = draw(st.booleans())
        axes[name] = [
            {k: draw(st.sampled_from(VALUES)) for k in ([name, *draw(keys)] if linked
                                                         else [name])}
            for _ in range(draw(st.integers(1, 4)))]
    pattern = st.dictionaries(st.sampled_from((*KEYS, "e")), st.sampled_from(VALUES),
                              min_size=1, max_size=3)
    return axes, draw(st.lists(pattern, max_size=5)), draw(st.lists(pattern, max_size=4))


@settings(max_examples=examples(400), deadline=None, derandomize=True)
@given(entry=entries(), budget=st.sampled_from([5, 50, 200_000]))
def test_the_count_is_the_expansion_or_a_lower_bound_of_it(
        entry: tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]],
                     list[dict[str, Any]]], budget: int) -> None:
    axes, exclude, include = entry
    count = count_combos(axes, exclude, include, budget=budget)
    expanded = len(expand(axes, exclude, include))
    if count.exact:
        assert count.n == expanded
    else:
        assert count.n <= expanded


def test_overlapping_excludes_are_counted_once() -> None:
    axes = {k: [{k: str(i)} for i in range(10)] for k in ("a", "b", "c")}
    exclude = [{"a": "1"}, {"b": "1"}, {"a": "1", "b": "1"}, {"c": "2", "a": "1"}]
    assert count_combos(axes, exclude) == Count(9 * 9 * 10)


def test_a_sweep_past_its_budget_gives_a_lower_bound_that_says_so() -> None:
    axes = {k: [{k: str(i)} for i in range(10)] for k in ("a", "b", "c")}
    exclude = [{"a": "1"}, {"b": "1"}]
    count = count_combos(axes, exclude, [{"a": "1", "new": "x"}], budget=3)
    assert count == Count(1000 - 100 - 100, exact=False)
    assert str(count) == "at least 800"


def test_a_huge_product_is_counted_without_being_made() -> None:
    # 10**30 combinations: enumerating them would never end.
    axes = {f"x{i}": [{f"x{i}": str(j)} for j in range(1000)] for i in range(10)}
    count = count_combos(axes, [{"x0": "1", "x9": "2"}, {"x0": "1"}],
                         [{"x0": "5", "x1": "1000"}, {"x2": "nope"}])
    assert count == Count(999 * 1000 ** 9 + 2)


def test_a_release_query_counts_as_one_value_and_its_keys_match_any_pattern() -> None:
    axes: dict[str, list[dict[str, Any]]] = {"torch": [], "numpy": [{"numpy": "<2"},
                                                                    {"numpy": ">=2"}]}
    assert count_combos(axes, [], [], unknown={"torch"}) == Count(2, exact=False)
    assert count_combos(axes, [{"torch": "2.6.0", "numpy": "<2"}], [{"numpy": "3"}],
                        unknown={"torch"}) == Count(1, exact=False)

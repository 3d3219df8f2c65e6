from __future__ import annotations

from harness.matrix.census import expand

#: The expansion GitHub documents for its include example.
GITHUB_INCLUDE_EXPANSION = [
    {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
    {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
    {"fruit": "pear", "animal": "cat", "color": "pink"},
    {"fruit": "pear", "animal": "dog", "color": "green"},
    {"fruit": "banana"},
    {"fruit": "banana", "animal": "cat"},
]


def axes(**values: list[str]) -> dict[str, list[dict[str, str]]]:
    return {k: [{k: v} for v in vs] for k, vs in values.items()}


def test_github_actions_documented_include_example() -> None:
    # The example from GitHub's "Expanding or adding matrix configurations" docs, verbatim.
    include = [{"color": "green"}, {"color": "pink", "animal": "cat"},
               {"fruit": "apple", "shape": "circle"}, {"fruit": "banana"},
               {"fruit": "banana", "animal": "cat"}]
    got = expand(axes(fruit=["apple", "pear"], animal=["cat", "dog"]), [], include)
    assert got == GITHUB_INCLUDE_EXPANSION


def test_exclude_matches_partially_and_runs_before_include() -> None:
    got = expand(axes(os=["a", "b"], v=["1", "2", "3"]), [{"v": "2"}, {"os": "b", "v": "3"}],
                 [{"os": "b", "v": "3", "extra": "x"}])
    assert got == [{"os": "a", "v": "1"}, {"os": "a", "v": "3"}, {"os": "b", "v": "1"},
                   {"os": "b", "v": "3", "extra": "x"}]


def test_linked_axis_values_move_together() -> None:
    linked = {"cuda": [{"cuda": "11.8", "index": "u118"}, {"cuda": "12.1", "index": "u121"}],
              "torch": [{"torch": "2.1"}]}
    got = expand(linked)
    assert got == [{"cuda": "11.8", "index": "u118", "torch": "2.1"},
                   {"cuda": "12.1", "index": "u121", "torch": "2.1"}]


def test_include_may_overwrite_values_added_by_an_earlier_include() -> None:
    got = expand(axes(a=["1"]), [], [{"x": "first"}, {"a": "1", "x": "second"}])
    assert got == [{"a": "1", "x": "second"}]

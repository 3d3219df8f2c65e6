"""ddmin finds the smallest set of package changes that flips a cell."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.plan.bisect import ddmin


@given(st.integers(1, 40), st.data())
def test_finds_exactly_the_changes_that_flip_together(n: int, data: st.DataObject) -> None:
    culprits = data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=min(n, 3)))
    found, trials = ddmin(list(range(n)), lambda subset: culprits <= set(subset))
    assert set(found) == culprits
    assert len({t.changes for t in trials}) == len(trials)  # no trial built twice


def test_a_trial_that_cannot_be_built_is_kept_and_not_taken_as_a_flip() -> None:
    def flips(subset: tuple[str, ...]) -> bool | None:
        if subset == ("numpy",):
            return None  # does not resolve alone
        return {"torch", "numpy"} <= set(subset)
    found, trials = ddmin(["torch", "numpy", "pyyaml", "tqdm"], flips)
    assert set(found) == {"torch", "numpy"}
    assert any(t.flips is None for t in trials)

"""Bisect's search: the boundary, in as few probes as binary search needs, skips said."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.plan.bisect import Probe, probes_needed, search


def oracle(boundary: int, skipped: frozenset[int] = frozenset()):  # type: ignore[no-untyped-def]
    calls: list[str] = []

    def probe(version: str) -> Probe:
        calls.append(version)
        i = int(version)
        if i in skipped:
            return Probe(version=version, outcome="ERROR", skipped=True)
        if i < boundary:
            return Probe(version=version, outcome="REPRODUCED", signature="sig")
        return Probe(version=version, outcome="PASS")
    return probe, calls


GOOD = Probe(version="-1", outcome="REPRODUCED", signature="sig")


@given(st.integers(0, 200), st.data())
def test_finds_the_first_release_with_the_other_outcome(n: int, data: st.DataObject) -> None:
    boundary = data.draw(st.integers(0, n))  # candidates[boundary] is the first PASS
    bad = Probe(version=str(n), outcome="PASS")
    probe, calls = oracle(boundary)
    found = search([str(i) for i in range(n)], GOOD, bad, probe)
    assert found.first.version == str(boundary)
    assert found.last.version == str(boundary - 1)
    assert len(calls) == len(set(calls)) <= probes_needed(n)
    assert not found.untested


def test_a_release_that_cannot_be_built_is_skipped_and_said() -> None:
    probe, calls = oracle(boundary=3, skipped=frozenset({2}))
    found = search([str(i) for i in range(6)], GOOD, Probe(version="6", outcome="PASS"), probe)
    assert (found.last.version, found.first.version) == ("1", "3")
    assert found.untested == ("2",)  # the change is at 2 or 3: said, not guessed
    assert "2" in calls


def test_a_third_outcome_counts_as_a_change() -> None:
    def probe(version: str) -> Probe:
        return Probe(version=version, outcome="FAIL" if int(version) >= 2 else "REPRODUCED",
                     signature=None if int(version) >= 2 else "sig")
    found = search(["0", "1", "2", "3"], GOOD, Probe(version="4", outcome="PASS"), probe)
    assert (found.last.version, found.first.version, found.first.outcome) == ("1", "2", "FAIL")


def test_probes_needed() -> None:
    assert [probes_needed(n) for n in (0, 1, 2, 3, 4, 7, 8)] == [0, 1, 2, 2, 3, 3, 4]

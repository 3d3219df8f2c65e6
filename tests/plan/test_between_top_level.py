"""``--between``'s pure parts: the changes are the top-level packages', and an answer that
rests on a trial that said nothing is not determined."""

from __future__ import annotations

from harness.plan.bisect import Trial, ddmin, top_level_changes, undecided

# What a torch 2.1.2 + numpy 1 environment and a torch 2.2.2 + numpy 2 one held.
GOOD = {"torch": "2.1.2", "numpy": "1.26.4", "nvidia-nccl-cu12": "2.18.1", "triton": "2.1.0",
        "Transformers": "4.46.3", "filelock": "3.13.1"}
BAD = {"torch": "2.2.2", "numpy": "2.4.6", "nvidia-nccl-cu12": "2.19.3", "triton": "2.2.0",
       "transformers": "4.46.3", "filelock": "3.16.0", "sympy": "1.13.3"}


def test_only_the_top_level_packages_that_moved_are_changes() -> None:
    changes, one_sided = top_level_changes(["torch", "numpy", "transformers"], GOOD, BAD)
    # torch's own pins (nccl, triton) and what came with it are the resolver's to settle.
    assert changes == [("numpy", "1.26.4", "2.4.6"), ("torch", "2.1.2", "2.2.2")]
    assert one_sided == []


def test_a_top_level_package_only_one_environment_holds_is_said() -> None:
    changes, one_sided = top_level_changes(["torch", "sympy"], GOOD, BAD)
    assert changes == [("torch", "2.1.2", "2.2.2")]
    assert one_sided == ["sympy"]


def test_an_answer_every_trial_confirms_is_determined() -> None:
    culprits, trials = ddmin(["numpy", "torch"], lambda subset: "numpy" in subset)
    assert culprits == ("numpy",)
    assert undecided(["numpy", "torch"], culprits, trials) == []


def test_a_pair_proven_needed_together_is_determined() -> None:
    changes = ["a", "b", "c"]
    culprits, trials = ddmin(changes, lambda subset: {"a", "b"} <= set(subset))
    assert set(culprits) == {"a", "b"}
    assert undecided(changes, culprits, trials) == []


def test_an_answer_resting_on_trials_that_could_not_be_built_is_inconclusive() -> None:
    # Each package moved alone does not resolve: whether one of them or both flip the cell
    # is not known, and ddmin's answer (both) must not be given as found.
    changes = ["torch", "numpy"]
    culprits, trials = ddmin(changes, lambda subset: None)
    assert set(culprits) == {"torch", "numpy"}
    assert sorted(undecided(changes, culprits, trials)) == [("numpy",), ("torch",)]


def test_an_answer_nothing_confirms_is_inconclusive() -> None:
    # ddmin's result must be seen to flip: a candidate no trial ran is not an answer.
    trials = (Trial(("b",), False),)
    assert undecided(["a", "b", "c"], ("a",), trials) == [("a",)]

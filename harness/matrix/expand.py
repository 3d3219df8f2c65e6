"""Matrix expansion with the semantics of GitHub Actions' ``strategy.matrix`` (pure)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.core.releases import release_order

Combo = dict[str, Any]
Follower = Callable[[Combo], Sequence[Mapping[str, Any]]]


def product(axes: Mapping[str, Sequence[Mapping[str, Any]]],
            follow: Mapping[str, Follower] | None = None) -> list[Combo]:
    """Cross the axes (each value a mapping: several keys for a linked axis). An axis in
    ``follow`` takes the values its function gives for each combination of the others."""
    if not axes:
        return []
    follow = follow or {}
    fixed = [axis for axis in axes if axis not in follow]
    followed = [axis for axis in axes if axis in follow]
    # Sorted by their positions along the axes, combinations come as itertools.product's.
    placed: list[tuple[tuple[Any, ...], Combo]] = []
    for picks in itertools.product(*(range(len(axes[axis])) for axis in fixed)):
        at = dict(zip(fixed, picks, strict=True))
        base: Combo = {}
        for axis in fixed:
            base.update(axes[axis][at[axis]])
        values = {axis: follow[axis](base) for axis in followed}
        for more in itertools.product(*(range(len(values[axis])) for axis in followed)):
            at.update(zip(followed, more, strict=True))
            combo: Combo = {}
            for axis in axes:
                combo.update(values[axis][at[axis]] if axis in values else axes[axis][at[axis]])
            placed.append((tuple(release_order(combo[axis]) if axis in values else at[axis]
                                 for axis in axes), combo))
    if followed:
        placed.sort(key=lambda item: item[0])
    return [combo for _, combo in placed]


def expand(
    axes: Mapping[str, Sequence[Mapping[str, Any]]],
    exclude: Sequence[Mapping[str, Any]] = (),
    include: Sequence[Mapping[str, Any]] = (),
    follow: Mapping[str, Follower] | None = None,
) -> list[Combo]:
    """The product less what ``exclude`` matches; an include extends each original combination
    whose original values it does not overwrite, else is a new one."""
    combos = product(axes, follow)
    original_keys = {key for values in axes.values() for value in values for key in value}
    original_keys |= {key for combo in combos for key in combo}  # with what queries gave
    originals = [dict(c) for c in combos
                 if not any(all(k in c and c[k] == v for k, v in pattern.items())
                            for pattern in exclude)]
    added: list[Combo] = []
    for extra in include:
        hit = False
        for combo in originals:
            if all(combo.get(k) == v for k, v in extra.items() if k in original_keys):
                combo.update(extra)
                hit = True
        if not hit:
            added.append(dict(extra))
    return originals + added

"""Matrix expansion with the semantics of GitHub Actions' ``strategy.matrix``.

Pure functions over plain mappings: product over the axes, then ``exclude`` (partial match),
then ``include`` (extend every original combination it does not overwrite, else add a new one).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

Combo = dict[str, Any]


def product(axes: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Combo]:
    """Cross the axes. Each axis value is a mapping: one key for a plain axis, several for a
    linked axis whose keys move together (conda-forge's zip_keys)."""
    if not axes:
        return []
    combos = []
    for choice in itertools.product(*axes.values()):
        combo: Combo = {}
        for part in choice:
            combo.update(part)
        combos.append(combo)
    return combos


def matches(combo: Mapping[str, Any], pattern: Mapping[str, Any]) -> bool:
    return all(key in combo and combo[key] == value for key, value in pattern.items())


def apply_exclude(combos: list[Combo], exclude: Sequence[Mapping[str, Any]]) -> list[Combo]:
    return [c for c in combos if not any(matches(c, pattern) for pattern in exclude)]


def apply_include(
    combos: list[Combo], include: Sequence[Mapping[str, Any]], original_keys: set[str]
) -> list[Combo]:
    """An include extends each original combination whose *original* values it does not
    overwrite (values added by earlier includes may be overwritten); one that extends none
    becomes a new combination. New combinations are never extended by later includes."""
    originals = [dict(c) for c in combos]
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


def expand(
    axes: Mapping[str, Sequence[Mapping[str, Any]]],
    exclude: Sequence[Mapping[str, Any]] = (),
    include: Sequence[Mapping[str, Any]] = (),
) -> list[Combo]:
    original_keys = {key for values in axes.values() for value in values for key in value}
    return apply_include(apply_exclude(product(axes), exclude), include, original_keys)

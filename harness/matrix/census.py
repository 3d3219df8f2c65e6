"""Matrix expansion as GitHub Actions' ``strategy.matrix`` does it (pure), and how many
combinations it makes, counted without making one (past a budget, a lower bound)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import SpecError
from harness.core.matrix import CaseSelector
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
    for picks in itertools.product(*(enumerate(axes[axis]) for axis in fixed)):
        at = dict(zip(fixed, picks, strict=True))  # axis: (position, value)
        base: Combo = {}
        for _, value in picks:
            base.update(value)
        for more in itertools.product(*(enumerate(follow[axis](base)) for axis in followed)):
            at.update(zip(followed, more, strict=True))
            combo: Combo = {}
            for axis in axes:
                combo.update(at[axis][1])
            placed.append((tuple(release_order(combo.get(axis, "")) if axis in follow
                                 else at[axis][0] for axis in axes), combo))
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
    original_keys = {key for combo in combos for key in combo}  # with what queries gave
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


#: Steps of the sweep before it gives up for the lower bound.
BUDGET = 200_000

#: How many cases some selectors pick; None when not known (harness.plan.cells.case_counter).
CaseCount = Callable[[Path, tuple[CaseSelector, ...]], int | None]
CasePick = Callable[[tuple[CaseSelector, ...]], int | None]  # a CaseCount at one cases_dir

Values = Sequence[Mapping[str, Any]]
Box = tuple[frozenset[int] | None, ...]  # per axis: the values' positions it holds, None: all


@dataclass(frozen=True)
class Count:
    """A number of combinations, environments or cells: exactly ``n``, or at least ``n``."""

    n: int
    exact: bool = True

    def __add__(self, other: Count) -> Count:
        return Count(self.n + other.n, self.exact and other.exact)

    def __mul__(self, other: Count) -> Count:
        return Count(self.n * other.n, self.exact and other.exact)

    def __str__(self) -> str:
        return f"{self.n:,}" if self.exact else f"at least {self.n:,}"


def refuse_past(cells: Count, limit: int, file: str, line: int) -> None:
    """Refuse a matrix past the cell limit, wherever it is counted."""
    if cells.n > limit:
        raise SpecError(f"the matrix expands to {cells} cells, over the limit of {limit:,} "
                        "(raise it with --max-cells)", file=file, line=line)


def cells_per_env(settings: Mapping[str, Any], pick: CasePick | None = None) -> Count:
    """An environment's targets (from its checked settings) times its cases (as ``pick`` counts
    them, else the fewest its selectors pick) and suites."""
    hardware: Sequence[str] = settings.get("hardware", ("cpu",))
    cases: tuple[CaseSelector, ...] = settings.get("cases", ())
    suites: Sequence[str] = settings.get("suites", ())
    targets = len(set(hardware) - {"auto"}) or (1 if "auto" in hardware else 0)
    exact = "auto" not in hardware
    if suites and not cases:
        return Count(targets * len(suites), exact)
    picked = pick(cases) if pick is not None else None
    if picked is not None:
        return Count(targets * (picked + len(suites)), exact)
    # Each selector matches a case (else planning stops); those naming cases outright (no
    # glob, marker:, path or ::variant) match different ones. No selector: maybe no case.
    named = {c.pattern for c in cases
             if not (set(c.pattern) & set("*?[") or c.pattern.startswith("marker:")
                     or c.pattern.endswith(".py") or "::" in c.pattern)}
    found = max(len(named), 1) if cases else 0
    return Count(targets * (found + len(suites)), exact=False)


class _OverBudgetError(Exception):
    """The sweep ran out of steps: an internal signal, never shown (not a HarnessError)."""


def count_combos(axes: Mapping[str, Values], exclude: Sequence[Mapping[str, Any]] = (),
                 include: Sequence[Mapping[str, Any]] = (), *,
                 unknown: Collection[str] = (), budget: int = BUDGET) -> Count:
    """``len(expand(axes, exclude, include))``; an axis with no values is a release query, and
    keys in ``unknown`` match any pattern (a lower bound)."""
    if not axes:
        return Count(len(include))  # no combination: each include is one of its own
    fixed = [axis for axis, values in axes.items() if values]
    sizes = [len(axes[axis]) for axis in fixed]
    owner: dict[str, list[int]] = {}  # the axes each key comes from (a linked axis repeats one)
    for i, axis in enumerate(fixed):
        for key in {k for value in axes[axis] for k in value}:
            owner.setdefault(key, []).append(i)
    exact = len(fixed) == len(axes)
    boxes = []
    for pattern in exclude:
        box, sure = _box(pattern, axes, fixed, owner, set(unknown), present=True)
        exact = exact and sure
        if box is not None:
            boxes.append(box)
    sweep = _Sweep(sizes, boxes, budget)
    try:
        left = sweep.left(tuple(None for _ in fixed))
    except _OverBudgetError:
        exact = False
        left = max(0, math.prod(sizes) - sum(_size(box, sizes) for box in boxes))
    if not exact:  # whether an include extends something is not known: it adds nothing
        return Count(left, exact=False)
    added = 0
    for extra in include:
        box, sure = _box(extra, axes, fixed, owner, set(), present=False)
        if not sure:
            return Count(left + added, exact=False)
        try:
            added += box is None or sweep.left(box) == 0  # it extends nothing: one more
        except _OverBudgetError:
            return Count(left + added, exact=False)
    return Count(left + added)


def _box(pattern: Mapping[str, Any], axes: Mapping[str, Values], fixed: Sequence[str],
         owner: Mapping[str, list[int]], unknown: set[str], *, present: bool
         ) -> tuple[Box | None, bool]:
    """The combinations ``pattern`` matches as a box (None: none), and whether it is exact;
    ``present``: exclude's match, else include's."""
    box: list[frozenset[int] | None] = [None] * len(fixed)
    sure = True
    for key, wanted in pattern.items():
        at = owner.get(key, [])
        if key in unknown or len(at) > 1:
            # Set by a query or by two axes: assumed to match (not exact).
            sure = False
            continue
        if not at:
            if present:
                return None, True  # a key no combination has: an exclude matches none
            continue  # an include's own key: it adds it, matching nothing
        i = at[0]
        values = axes[fixed[i]]
        held = frozenset(j for j, value in enumerate(values)
                         if (key in value or not present) and value.get(key) == wanted)
        before = box[i]
        box[i] = held = held if before is None else before & held
        if not held:
            return None, sure
    return tuple(box), sure


def _size(box: Box, sizes: Sequence[int]) -> int:
    return math.prod(size if held is None else len(held)
                     for held, size in zip(box, sizes, strict=True))


class _Sweep:
    """Counts the combinations of a domain (a box) that no excluded box holds."""

    def __init__(self, sizes: Sequence[int], boxes: Sequence[Box], budget: int) -> None:
        self.sizes, self.boxes, self.budget = sizes, boxes, budget
        self.memo: dict[tuple[Box, int, frozenset[int]], int] = {}

    def left(self, domain: Box) -> int:
        return self._left(domain, 0, frozenset(range(len(self.boxes))))

    def _left(self, domain: Box, axis: int, active: frozenset[int]) -> int:
        """Combinations of axes ``axis``... in ``domain`` that no ``active`` box holds."""
        if not active:
            return _size(domain[axis:], self.sizes[axis:])
        if axis == len(self.sizes):
            return 0
        key = (domain, axis, active)
        if key in self.memo:
            return self.memo[key]
        held = domain[axis]
        groups: dict[frozenset[int], int] = {}
        for j in range(self.sizes[axis]) if held is None else held:
            self.budget -= len(active) + 1
            if self.budget < 0:
                raise _OverBudgetError
            still = frozenset(b for b in active
                              if (box := self.boxes[b][axis]) is None or j in box)
            groups[still] = groups.get(still, 0) + 1
        found = sum(n * self._left(domain, axis + 1, still) for still, n in groups.items())
        self.memo[key] = found
        return found

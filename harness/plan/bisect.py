"""Searches over what changed, pure (the trials are given): bisect an axis's releases as ``git
bisect`` does, and delta debugging (Zeller's ddmin) over the package changes between two runs."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

from packaging.utils import canonicalize_name


@dataclass(frozen=True, kw_only=True)
class Probe:
    """One release's outcome for the bisected cell, as its run recorded it."""

    version: str
    outcome: str  # PASS, REPRODUCED, FAIL, ...
    signature: str | None = None
    reason: str = ""
    run_id: str = ""  # the ordinary run that holds it ("" : read from an earlier run)
    skipped: bool = False  # its environment could not be built: says nothing

    @property
    def kind(self) -> tuple[str, str | None]:
        """What bisect compares: the outcome class and, for a failure, its signature."""
        return (self.outcome, self.signature)

    @property
    def shown(self) -> str:
        return self.outcome + (f" ({self.signature})" if self.signature else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Boundary:
    """Where the outcome changes (``last`` good, ``first`` not), and unbuilt releases between."""

    last: Probe
    first: Probe
    probes: tuple[Probe, ...] = ()  # in the order they ran
    untested: tuple[str, ...] = ()


def search(candidates: Sequence[str], good: Probe, bad: Probe,
           probe: Callable[[str], Probe]) -> Boundary:
    """The boundary among ``candidates`` (strictly between ``good`` and ``bad``, in order)."""
    tried: dict[int, Probe] = {}  # in the order they ran
    lo, hi = -1, len(candidates)  # lo has the good outcome, hi another
    while inside := [i for i in range(lo + 1, hi) if i not in tried]:
        mid = inside[(len(inside) - 1) // 2]
        found = tried[mid] = probe(candidates[mid])
        if found.skipped:
            continue
        if found.kind == good.kind:
            lo = mid
        else:
            hi = mid
    last = tried[lo] if lo >= 0 else good
    first = tried[hi] if hi < len(candidates) else bad
    untested = tuple(candidates[i] for i in range(lo + 1, hi) if tried[i].skipped)
    return Boundary(last=last, first=first, probes=tuple(tried.values()), untested=untested)


def probes_needed(n: int) -> int:
    """At most this many probes for ``n`` releases, none skipped: ceil(log2(n + 1))."""
    return max(0, n.bit_length())


T = TypeVar("T")
Change = tuple[str, str, str]  # (package, good version, bad version)


@dataclass(frozen=True)
class Trial(Generic[T]):
    changes: tuple[T, ...]
    flips: bool | None  # None: the trial could not be built (said, and not counted)


def ddmin(changes: Sequence[T], flips: Callable[[tuple[T, ...]], bool | None]
          ) -> tuple[tuple[T, ...], tuple[Trial[T], ...]]:
    """A 1-minimal subset of ``changes`` that flips, and every trial run (all of ``changes``
    is taken to flip, none not to)."""
    current = tuple(changes)
    trials: list[Trial[T]] = []
    tried: dict[tuple[T, ...], bool | None] = {current: True, (): False}

    def test(subset: tuple[T, ...]) -> bool | None:
        if subset not in tried:
            tried[subset] = flips(subset)
            trials.append(Trial(subset, tried[subset]))
        return tried[subset]

    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        for chunk in chunks:  # one part alone flips: search in it
            if test(chunk):
                current, n = chunk, 2
                break
        else:
            for chunk in chunks:  # or all but one part: that part is not needed
                rest = tuple(c for c in current if c not in chunk)
                if n > 2 and test(rest):
                    current, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(current):
                    break
                n = min(len(current), 2 * n)
    return current, tuple(trials)


def _split(items: tuple[T, ...], n: int) -> list[tuple[T, ...]]:
    size, extra = divmod(len(items), n)
    ends = [i * size + min(i, extra) for i in range(n + 1)]
    return [items[a:b] for a, b in itertools.pairwise(ends) if a < b]


def top_level_changes(top: Iterable[str], before: Mapping[str, str], after: Mapping[str, str]
                      ) -> tuple[list[Change], list[str]]:
    """The packages of ``top`` whose versions differ between ``before`` and ``after``, and
    those only one holds."""
    old = {str(canonicalize_name(k)): v for k, v in before.items()}
    new = {str(canonicalize_name(k)): v for k, v in after.items()}
    names = sorted({str(canonicalize_name(n)) for n in top})
    changes = [(n, old[n], new[n]) for n in names if n in old and n in new and old[n] != new[n]]
    return changes, [n for n in names if (n in old) != (n in new)]


def undecided(changes: Sequence[T], culprits: tuple[T, ...], trials: Sequence[Trial[T]]
              ) -> list[tuple[T, ...]]:
    """The trials the answer ``culprits`` rests on that said nothing (empty: it is determined)."""
    known: dict[tuple[T, ...], bool | None] = {tuple(changes): True, (): False}
    known.update((t.changes, t.flips) for t in trials)
    needed = [(culprits, True)] + [(tuple(c for c in culprits if c != one), False)
                                   for one in culprits]
    return [subset for subset, want in needed if known.get(subset) is not want]

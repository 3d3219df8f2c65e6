"""Delta debugging (Zeller's ddmin) over the top-level package changes between two runs:
the smallest set that, applied alone to the good environment, gives the bad outcome. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from packaging.utils import canonicalize_name

T = TypeVar("T")
Change = tuple[str, str, str]  # (package, good version, bad version)


@dataclass(frozen=True)
class Trial(Generic[T]):
    changes: tuple[T, ...]
    flips: bool | None  # None: the trial could not be built (said, and not counted)


def ddmin(changes: Sequence[T], flips: Callable[[tuple[T, ...]], bool | None]
          ) -> tuple[tuple[T, ...], tuple[Trial[T], ...]]:
    """A 1-minimal subset of ``changes`` that flips (each change in it is needed), and every
    trial run. ``changes`` as a whole is taken to flip (it is the bad run), none to not."""
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
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return [c for c in out if c]


def top_level_changes(top: Iterable[str], before: Mapping[str, str], after: Mapping[str, str]
                      ) -> tuple[list[Change], list[str]]:
    """The packages of ``top`` whose versions differ between ``before`` and ``after`` (name ->
    version), and those only one of them holds (they cannot be moved alone)."""
    old = {str(canonicalize_name(k)): v for k, v in before.items()}
    new = {str(canonicalize_name(k)): v for k, v in after.items()}
    names = sorted({str(canonicalize_name(n)) for n in top})
    changes = [(n, old[n], new[n]) for n in names if n in old and n in new and old[n] != new[n]]
    return changes, [n for n in names if (n in old) != (n in new)]


def undecided(changes: Sequence[T], culprits: tuple[T, ...], trials: Sequence[Trial[T]]
              ) -> list[tuple[T, ...]]:
    """The trials the answer ``culprits`` rests on (it flips; without any one change it does
    not) that said nothing; empty: the answer is determined."""
    known: dict[tuple[T, ...], bool | None] = {tuple(changes): True, (): False}
    known.update((t.changes, t.flips) for t in trials)
    needed = [(culprits, True)] + [(tuple(c for c in culprits if c != one), False)
                                   for one in culprits]
    return [subset for subset, want in needed if known.get(subset) is not want]

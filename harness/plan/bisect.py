"""Bisect an axis's releases to the first one whose outcome differs (pure: probes are given),
as ``git bisect`` does: the good outcome moves the lower bound, any other the upper; a
release whose environment cannot be built is skipped and said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


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
        return {"version": self.version, "outcome": self.outcome, "signature": self.signature,
                "reason": self.reason, "run_id": self.run_id, "skipped": self.skipped}


@dataclass(frozen=True, kw_only=True)
class Boundary:
    """Where the outcome changes: ``last`` (good) and ``first`` (another), and the releases
    between them that could not be built."""

    last: Probe
    first: Probe
    probes: tuple[Probe, ...] = ()  # in the order they ran
    untested: tuple[str, ...] = field(default_factory=tuple)


def search(candidates: Sequence[str], good: Probe, bad: Probe,
           probe: Callable[[str], Probe]) -> Boundary:
    """The boundary among ``candidates`` (strictly between ``good`` and ``bad``, in order)."""
    tried: dict[int, Probe] = {}
    lo, hi = -1, len(candidates)  # lo has the good outcome, hi another
    probes: list[Probe] = []
    while True:
        inside = [i for i in range(lo + 1, hi) if i not in tried]
        if not inside:
            break
        mid = inside[(len(inside) - 1) // 2]
        found = probe(candidates[mid])
        tried[mid] = found
        probes.append(found)
        if found.skipped:
            continue
        if found.kind == good.kind:
            lo = mid
        else:
            hi = mid
    last = tried[lo] if lo >= 0 else good
    first = tried[hi] if hi < len(candidates) else bad
    untested = tuple(candidates[i] for i in range(lo + 1, hi) if tried[i].skipped)
    return Boundary(last=last, first=first, probes=tuple(probes), untested=untested)


def probes_needed(n: int) -> int:
    """At most this many probes for ``n`` releases, none skipped: ceil(log2(n + 1))."""
    return max(0, n.bit_length())

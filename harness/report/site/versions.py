"""How versions read and sort in the report's tables."""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

#: Which package a verdict speaks of first, when several vary.
PRIORITY = ("torch", "transformer-engine", "flash-attn", "transformers", "transformer-lens",
            "mergekit", "llm-foundry", "mosaicml", "flashinfer-python", "numpy", "cuda",
            "python", "backend")


def by_priority(names: Iterable[str], first: Sequence[str] = ()) -> tuple[str, ...]:
    """Package names as tables order them: ``first``, then ``PRIORITY``, then by name."""
    order = [*first, *(p for p in PRIORITY if p not in first)]
    return tuple(sorted(names, key=lambda k: (order.index(k) if k in order else len(order), k)))


def label(versions: Mapping[str, str], keys: Sequence[str], default: str) -> str:
    """A row's or column's name: its versions of ``keys`` ("torch 2.0.1 · numpy 1.26.4")."""
    return " · ".join(f"{k} {versions.get(k, '—')}" for k in keys) or default


def slug(name: str) -> str:
    """A page's file name part for a case or suite."""
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower())


def varying(rows: Iterable[Mapping[str, str]]) -> set[str]:
    """The names whose value differs between the rows ("—" where a row has none)."""
    rows = list(rows)
    names = {k for row in rows for k in row}
    return {k for k in names if len({row.get(k, "—") for row in rows}) > 1}


@functools.cache  # a report sorts by a few versions, once per cell
def version_sort_key(value: str) -> tuple[int, Any]:
    try:
        return (0, Version(value.lstrip("=")))
    except InvalidVersion:
        return (1, value)


def combinations(found: Iterable[tuple[str, ...]], packages: Sequence[str]) -> tuple[str, ...]:
    """Version combinations as a reader takes them in (``torch 2.0.1, 2.2.2 with numpy 2.4.6``)."""
    combos = set(found)
    if len(packages) == 1:
        return tuple(sorted({c[0] for c in combos}, key=version_sort_key))
    by_rest: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for combo in combos:
        by_rest[combo[1:]].add(combo[0])
    out = []
    for rest in sorted(by_rest, key=lambda r: [version_sort_key(v) for v in r]):
        firsts = ", ".join(sorted(by_rest[rest], key=version_sort_key))
        others = " ".join(f"{p} {v}" for p, v in zip(packages[1:], rest, strict=True))
        out.append(f"{packages[0]} {firsts} with {others}")
    return tuple(out)

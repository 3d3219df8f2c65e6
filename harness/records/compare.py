"""Which cell of an earlier run a cell is compared with ("what changed", a bump's report)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from harness.core.results import CellResult

LogicalKey = tuple[str, str, str]


def match_previous(old: Sequence[CellResult], new: Sequence[CellResult],
                   moved: Sequence[str] = ()) -> dict[LogicalKey, CellResult]:
    """The cell of ``old`` each cell of ``new`` is compared with, by the new cell's logical
    key: the cell with the same logical key; or, for the keys a ``--set`` bump replaced
    (``moved``: ``torch``), the cell whose environment differs only in those keys (of
    several, the one with the newest release: the bump is from there)."""
    if not moved:
        return {r.logical_key: r for r in old}

    def neutral(r: CellResult) -> tuple[Any, ...]:
        rest = tuple(sorted((k, v) for k, v in r.values.items() if k not in moved))
        return (r.environment.split(":", 1)[0], rest, r.case_id, r.variant, r.hardware_target)

    def newest(r: CellResult) -> tuple[tuple[int, Any], ...]:
        return tuple(_order(r.values.get(k, "")) for k in moved)

    chosen: dict[tuple[Any, ...], CellResult] = {}
    for r in old:
        key = neutral(r)
        if key not in chosen or newest(r) > newest(chosen[key]):
            chosen[key] = r
    return {r.logical_key: chosen[neutral(r)] for r in new if neutral(r) in chosen}


def _order(value: str) -> tuple[int, Any]:
    try:
        return (1, Version(value.lstrip("=")))
    except InvalidVersion:
        return (0, value)


def bumped(metas: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The keys the runs' ``--set`` replaced (their records' ``set``), in order."""
    keys: dict[str, None] = {}
    for meta in metas:
        keys.update(dict.fromkeys(meta.get("set") or {}))
    return tuple(keys)

"""Shards: a plan split for many machines, the same on every one (pure): by hardware target,
whole environments, balanced by ``--durations-from`` durations."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.errors import UsageError
from harness.core.words import plural
from harness.plan.cells import Cell, Plan

MAX_GHA_JOBS = 256  # GitHub Actions' limit on the jobs of one matrix


@dataclass(frozen=True, kw_only=True)
class Shard:
    index: int  # 1-based
    count: int
    hardware: str
    cells: tuple[Cell, ...]

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard {text!r}: expected I/N with 1 <= I <= N, like 2/8")
    return int(match[1]), int(match[2])


def make_shards(plan: Plan, count: int, durations: Mapping[str, float] | None = None
                ) -> list[Shard]:
    """``count`` shards of ``plan`` (some may be empty when there are fewer groups)."""
    weights = _weights(plan.cells, durations or {})
    by_hardware: dict[str, dict[str, list[Cell]]] = {}
    for cell in plan.cells:
        by_hardware.setdefault(cell.hardware, {}).setdefault(cell.env.name, []).append(cell)
    kinds = sorted(by_hardware)
    if count < len(kinds):
        raise UsageError(f"{plural(count, 'shard')} cannot hold {len(kinds)} hardware targets "
                         f"({', '.join(kinds)}): a shard runs on one kind of runner")
    totals = {hw: sum(weights[c.cell_id] for g in groups.values() for c in g)
              for hw, groups in by_hardware.items()}
    per_kind = _apportion(totals, count, {hw: len(g) for hw, g in by_hardware.items()})
    shards: list[Shard] = []
    for hw in kinds:
        bins: list[list[Cell]] = [[] for _ in range(per_kind[hw])]
        loads = [0.0] * per_kind[hw]
        groups = sorted(by_hardware[hw].items(),
                        key=lambda kv: (-sum(weights[c.cell_id] for c in kv[1]), kv[0]))
        for _, cells in groups:  # longest first onto the least loaded shard
            least = loads.index(min(loads))
            bins[least].extend(cells)
            loads[least] += sum(weights[c.cell_id] for c in cells)
        for cells in bins:
            shards.append(Shard(index=len(shards) + 1, count=count, hardware=hw,
                                cells=tuple(cells)))
    # More shards than environments (or no cell at all): the rest have nothing to do.
    return shards + [Shard(index=i + 1, count=count, hardware=(kinds or ["cpu"])[-1], cells=())
                     for i in range(len(shards), count)]


def select_shard(plan: Plan, shard: str, durations: Mapping[str, float] | None = None) -> Plan:
    index, count = parse_shard(shard)
    return Plan(cells=make_shards(plan, count, durations)[index - 1].cells)


def fit_shards(plan: Plan, wanted: int | None, limit: int = MAX_GHA_JOBS) -> tuple[int, str]:
    """How many shards: ``wanted`` (default: one per environment and hardware), one per target
    at least, ``limit`` at most; and a note when it had to change."""
    if wanted is not None and wanted < 1:
        raise UsageError(f"--shards {wanted}: must be at least 1")
    kinds = len({c.hardware for c in plan.cells})
    groups = len({(c.hardware, c.env.name) for c in plan.cells})
    count = wanted or groups
    note = ""
    if count > limit:
        note = f"{count} shards would exceed {limit} jobs; made {limit}"
        count = limit
    if count < kinds:
        note = f"{plural(count, 'shard')} cannot hold {kinds} hardware targets; made {kinds}"
        count = kinds
    return max(1, count), note


def shard_jobs(plan: Plan, count: int, durations: Mapping[str, float],
               runner_for: Callable[[str], list[str]]) -> list[dict[str, Any]]:
    """One CI job per non-empty shard (``harness plan --format gha``)."""
    return [{"shard": shard.label, "hardware": shard.hardware,
             "runs-on": runner_for(shard.hardware),
             "artifact": f"harness-shard-{shard.index}-of-{shard.count}",
             "cells": len(shard.cells), "environments": len({c.env.name for c in shard.cells})}
            for shard in make_shards(plan, count, durations) if shard.cells]


def _weights(cells: Sequence[Cell], durations: Mapping[str, float]) -> dict[str, float]:
    known = [durations[c.cell_id] for c in cells if c.cell_id in durations]
    unknown = sorted(known)[len(known) // 2] if known else 1.0  # the median: a typical cell
    return {c.cell_id: max(durations.get(c.cell_id, unknown), 1e-3) for c in cells}


def _apportion(totals: Mapping[str, float], count: int, groups: Mapping[str, int]
               ) -> dict[str, int]:
    """Shards per hardware target in proportion to its weight, 1 to its environments each,
    largest remainders first."""
    total = sum(totals.values()) or 1.0
    share = {hw: count * w / total for hw, w in totals.items()}
    out = {hw: max(1, min(groups[hw], int(s))) for hw, s in share.items()}
    order = sorted(totals, key=lambda hw: (-(share[hw] - int(share[hw])), hw))
    # Once a kind has a shard per environment, it takes no more: the rest stay empty.
    while sum(out.values()) < count and (room := [hw for hw in order if out[hw] < groups[hw]]):
        for hw in room[: count - sum(out.values())]:
            out[hw] += 1
    while sum(out.values()) > count:
        hw = max((h for h in out if out[h] > 1), key=lambda h: (out[h] - share[h], h))
        out[hw] -= 1
    return out

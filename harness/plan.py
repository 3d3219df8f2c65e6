"""Cells: environment × case variant × hardware target, with ids stable across runs and machines."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from harness.cases import CaseVariant, select_cases
from harness.errors import SpecError, UsageError
from harness.spec import EnvSpec, MatrixSpec, cell_limit


@dataclass(frozen=True, kw_only=True)
class Cell:
    cell_id: str
    env: EnvSpec
    case: CaseVariant
    hardware: str

    @property
    def retries(self) -> int:
        """How often a failed try runs again: the environment's or the case's, the larger."""
        return max(self.env.retries, self.case.retries)

    @property
    def needs_gpu_slot(self) -> bool:
        return self.hardware != "cpu"

    def to_dict(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "environment": self.env.name,
                "values": dict(self.env.values), "backend": self.env.backend,
                "case": self.case.case_id, "variant": self.case.variant,
                "nodeid": self.case.nodeid, "hardware": self.hardware}


@dataclass(frozen=True, kw_only=True)
class Plan:
    cells: tuple[Cell, ...]

    @property
    def environments(self) -> tuple[EnvSpec, ...]:
        seen: dict[str, EnvSpec] = {}
        for cell in self.cells:
            seen.setdefault(cell.env.name, cell.env)
        return tuple(seen.values())


def cell_id(env: EnvSpec, case: CaseVariant, hardware: str) -> str:
    """Hash of what defines the cell, never of paths or time: the same on every machine."""
    blob = json.dumps([env.name, env.key, case.nodeid, hardware]).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def make_plan(spec: MatrixSpec, cases: tuple[CaseVariant, ...], present: Sequence[str]) -> Plan:
    """Every cell the matrix defines; ``auto`` hardware becomes the targets ``present``.
    A matrix past the cell limit is refused with its count, before any cell is made."""
    count = sum(len(_targets(env.hardware, present)) * len(select_cases(cases, env.cases))
                for env in spec.environments)
    if count > cell_limit():
        raise SpecError(f"the matrix expands to {count:,} cells, over the limit of "
                        f"{cell_limit():,} (raise it with --max-cells)", file=spec.file,
                        line=spec.body_line or 1)
    cells = []
    for env in spec.environments:
        targets = _targets(env.hardware, present)
        for case in select_cases(cases, env.cases):
            for hw in targets:
                cells.append(Cell(cell_id=cell_id(env, case, hw), env=env, case=case,
                                  hardware=hw))
    return Plan(cells=tuple(cells))


def _targets(hardware: Iterable[str], present: Sequence[str]) -> list[str]:
    out: list[str] = []
    for target in hardware:
        for hw in (present if target == "auto" else [target]):
            if hw not in out:
                out.append(hw)
    return out


def filter_plan(plan: Plan, *, only: Sequence[str] = (), keyword: str | None = None,
                hardware: Sequence[str] = ()) -> Plan:
    """``--only AXIS=VALUE`` (OR within an axis, AND across axes; ``env=NAME`` globs the
    environment name), ``-k`` glob or substring on ``case::variant``, ``--hardware``."""
    wanted: dict[str, list[str]] = {}
    for item in only:
        axis, sep, value = item.partition("=")
        if not sep or not axis:
            raise UsageError(f"--only {item!r}: expected AXIS=VALUE")
        wanted.setdefault(axis.strip(), []).append(value.strip())
    known = {k for cell in plan.cells for k, _ in cell.env.values} | {"env"}
    for axis in wanted:
        if axis not in known:
            raise UsageError(f"--only {axis}=...: no such axis; axes are: "
                             + ", ".join(sorted(known)))

    def keep(cell: Cell) -> bool:
        values = dict(cell.env.values)
        for axis, options in wanted.items():
            if axis == "env":
                if not any(fnmatchcase(cell.env.name, o) for o in options):
                    return False
            elif values.get(axis) not in options:
                return False
        if keyword and not any(keyword in text or fnmatchcase(text, keyword)
                               for text in (cell.case.label, cell.case.nodeid)):
            return False
        return not hardware or cell.hardware in hardware

    kept = Plan(cells=tuple(c for c in plan.cells if keep(c)))
    if plan.cells and not kept.cells:
        raise UsageError("no cell matches the filters (--only, -k, --hardware)")
    return kept

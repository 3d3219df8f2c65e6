"""Cells: environment × case variant × hardware target, with ids stable across runs and machines."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from harness.core import jsonio
from harness.core.errors import UsageError
from harness.core.matrix import CaseSelector, EnvSpec, MatrixSpec
from harness.core.results import CellResult
from harness.matrix.census import CaseCount, Count, refuse_past
from harness.plan.cases import CaseVariant, collect_cases, select_cases
from harness.plan.suites import session_variant


@dataclass(frozen=True, kw_only=True)
class Cell:
    cell_id: str
    env: EnvSpec
    case: CaseVariant
    hardware: str
    #: A suite's session resumed (``--resume``): its tests' results already in the run.
    resumed: tuple[CellResult, ...] = ()

    @property
    def retries(self) -> int:
        """How often a failed try runs again: the environment's or the case's, the larger."""
        return max(self.env.retries, self.case.retries)

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
        return tuple({cell.env.name: cell.env for cell in self.cells}.values())


def cell_id(env: EnvSpec, nodeid: str, hardware: str) -> str:
    """Hash of what defines the cell, never of paths or time: the same on every machine; a
    suite's test: over its suite-qualified node id (``suite::nodeid``)."""
    blob = json.dumps([env.name, env.key, nodeid, hardware]).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def make_plan(spec: MatrixSpec, cases: tuple[CaseVariant, ...], present: Sequence[str]) -> Plan:
    """Every cell the matrix defines (``auto`` hardware: the targets ``present``), refused past
    the cell limit before any is made."""
    sessions = {s.name: session_variant(s) for s in spec.suites}
    # The environments of one matrix entry share their settings: each kind is counted once.
    per_env: dict[tuple[object, ...], int] = {}
    count = 0
    for env in spec.environments:
        kind = (env.hardware, env.cases, env.suites)
        if kind not in per_env:
            per_env[kind] = len(_targets(env.hardware, present)) * (
                len(_env_cases(env, cases)) + len(env.suites))
        count += per_env[kind]
    refuse_past(Count(count), spec.max_cells, spec.file, spec.body_line or 1)
    cells = []
    dumped: dict[str, str] = {}  # a node id or target, as json.dumps writes it
    for env in spec.environments:
        targets = _targets(env.hardware, present)
        # cell_id's bytes, '["<name>", "<key>", "<nodeid>", "<hardware>"]', shared parts once
        head = json.dumps([env.name, env.key])[:-1] + ", "
        for case in (*_env_cases(env, cases), *(sessions[s] for s in env.suites)):
            nodeid = dumped.get(case.nodeid) or dumped.setdefault(case.nodeid,
                                                                   json.dumps(case.nodeid))
            for hw in targets:
                target = dumped.get(hw) or dumped.setdefault(hw, json.dumps(hw))
                digest = hashlib.sha256(f"{head}{nodeid}, {target}]".encode()).hexdigest()
                cells.append(_cell(digest[:12], env, case, hw))
    return Plan(cells=tuple(cells))


def _cell(cell_id: str, env: EnvSpec, case: CaseVariant, hardware: str) -> Cell:
    """``Cell(...)`` with its ``__dict__`` given whole, not field by field (the same object)."""
    cell = object.__new__(Cell)
    object.__setattr__(cell, "__dict__", {"cell_id": cell_id, "env": env, "case": case,
                                          "hardware": hardware, "resumed": ()})
    return cell


def case_counter(collect: Callable[[Path], tuple[CaseVariant, ...]] = collect_cases
                 ) -> CaseCount:
    """For ``load_matrix(count_cases=...)``: how many cases some selectors pick, else None."""
    collected: dict[Path, tuple[CaseVariant, ...] | None] = {}

    def count(cases_dir: Path, selectors: tuple[CaseSelector, ...]) -> int | None:
        if cases_dir not in collected:
            try:
                collected[cases_dir] = collect(cases_dir.resolve())
            except UsageError:
                collected[cases_dir] = None
        cases = collected[cases_dir]
        try:
            return None if cases is None else len(select_cases(cases, selectors))
        except UsageError:
            return None
    return count


def _env_cases(env: EnvSpec, cases: tuple[CaseVariant, ...]) -> tuple[CaseVariant, ...]:
    """The cases of cases_dir an environment runs: none when it names only suites."""
    if env.suites and not env.cases:
        return ()
    return select_cases(cases, env.cases)


def json_lines(cells: Iterable[Cell]) -> Iterator[str]:
    """Each cell's JSON, one line: ``plan --format json``."""
    return (jsonio.dumps(cell.to_dict()).decode() for cell in cells)


def _targets(hardware: Iterable[str], present: Sequence[str]) -> list[str]:
    """The targets, ``auto`` as those ``present``, each once in order."""
    return list(dict.fromkeys(hw for target in hardware
                              for hw in (present if target == "auto" else [target])))


def filter_plan(plan: Plan, *, only: Sequence[str] = (), keyword: str | None = None,
                hardware: Sequence[str] = ()) -> Plan:
    """``--only AXIS=VALUE`` (OR within an axis, AND across; ``env=GLOB``), -k, --hardware."""
    if not only and not keyword and not hardware:
        return plan
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
        if not all(any(fnmatchcase(cell.env.name, o) for o in options) if axis == "env"
                   else values.get(axis) in options for axis, options in wanted.items()):
            return False
        if keyword and not any(keyword in text or fnmatchcase(text, keyword)
                               for text in (cell.case.label, cell.case.nodeid)):
            return False
        return not hardware or cell.hardware in hardware

    kept = Plan(cells=tuple(c for c in plan.cells if keep(c)))
    if plan.cells and not kept.cells:
        raise UsageError("no cell matches the filters (--only, -k, --hardware)")
    return kept

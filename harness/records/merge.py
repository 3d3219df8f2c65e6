"""One run from a plan's shards (CI artifacts): each planned cell once, as the shard that ran
it recorded it, or MISSING; two records of one cell resolved by attempt, then time, with a
warning. Merging the same folders again gives the same record.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from harness.core.errors import UsageError
from harness.core.redact import Redactor
from harness.core.results import CellResult, Outcome, counted
from harness.records import table
from harness.records.compare import choose_records
from harness.records.expect import recorded_rules
from harness.records.store import (
    FULL_PLAN,
    META,
    REFUSED,
    PlanText,
    RunStore,
    check_run_id,
    plan_cells,
    run_kind,
)
from harness.run.classify import Ending, classify


@dataclass
class MergeReport:
    store: RunStore
    cells: int = 0
    missing: int = 0
    conflicts: list[str] = field(default_factory=list)
    written: list[CellResult] = field(default_factory=list)  # each cell, in the record's order
    damaged: int = 0  # the lines of the runs merged left out (run.json ``damaged_lines``)


def merge_runs(sources: Sequence[RunStore], reports_dir: Path, *, run_id: str | None = None,
               warn: Callable[[str], None] = lambda _: None) -> MergeReport:
    if not sources:
        raise UsageError("merge: name at least one run folder")
    run_id = check_run_id(run_id or "merged-" + hashlib.sha256(
        json.dumps(sorted(s.run_id for s in sources)).encode()).hexdigest()[:10])
    target = reports_dir / "runs" / run_id
    if target.resolve() in {s.run_dir for s in sources}:
        raise UsageError(f"merge: {target} is one of the runs being merged")
    if (target / META).is_file() and "merged_from" not in RunStore(target).meta:
        raise UsageError(f"merge: run {run_id} exists and is not a merge; "
                         "name the merged run another --run-id")
    redactor = Redactor.from_environment()
    metas = [s.meta for s in sources]
    shards = [(s.run_dir, m) for s, m in zip(sources, metas, strict=True) if m.get("shard")]
    for run_dir, meta in shards[1:]:  # run.json alone: what the shards were cut from
        if any(meta.get(k) != shards[0][1].get(k) for k in ("matrix_sha256", "filters", "set")):
            warn(f"{run_dir}: a shard of another plan than {shards[0][0]} (the matrix, filters "
                 "or --set differ); the merged plan is the latter's")
    with plan_cells(*sources):
        planned, order = _plan(sources, metas, redactor)
    # Read before any file is touched: one that cannot be read leaves an earlier merge of
    # the name as it was.
    chosen, conflicts = choose_records(sources, warn)
    _create(sources, metas, reports_dir, run_id, redactor, planned)
    out = RunStore(target, redactor)
    report = MergeReport(store=out, conflicts=conflicts,
                         damaged=sum(len(s.damaged) for s in sources))
    envs: set[str] = set()  # what each environment held, from the first shard with it
    for source in sources:
        for path in (source.run_dir / "envs").glob("*.json"):
            if path.name not in envs:
                envs.add(path.name)
                _link(str(path), f"{out.run_dir}/envs/{path.name}")
    relocate = _Relocate(out)
    lines = report.written
    gaps: _Gaps | None = None
    for cell_id in order:
        found = chosen.get(cell_id)
        if found is None or found[1].outcome is Outcome.MISSING:  # also a gap merged again
            with plan_cells(*sources):
                gaps = gaps or _Gaps(sources, metas)
                lines.append(gaps.missing(cell_id, out.run_id))
            report.missing += 1
        else:
            lines.append(relocate(*found))
    # Ran, though no plan here names it: after the planned ones, in the order a report sorts
    # them, so the record is in report order (run.json ``ordered_cells``).
    known = set(order)
    extra = sorted((found for cell_id, found in chosen.items() if cell_id not in known),
                   key=lambda found: (found[1].logical_key, found[1].cell_id))
    lines += [relocate(*found) for found in extra]
    out.extend(lines)  # the merged record is written once, whole
    # Said in its report's header, as its shards' records would have said them.
    out.update_meta(ordered_cells=len(lines),
                    **({"damaged_lines": report.damaged} if report.damaged else {}))
    report.cells = len(counted(lines))  # as the report counts: a suite's tests, not its session
    if out.redactor.secrets:  # the store redacted some on the way: the record itself
        report.written = list(out.results())
    table.write(out.run_dir, report.written, table.stamp(out.run_dir))
    return report


def _plan(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]], redactor: Redactor
          ) -> tuple[list[dict[str, Any]] | PlanText, list[str]]:
    """The merged run's plan as written (the first shard's text where it can be), its order."""
    passed = None if redactor.secrets else _plan_text(sources, metas)
    if passed is not None:
        return passed
    planned = _full_plan(sources, metas)
    return planned, [cell["cell_id"] for cell in planned]


def _create(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]], reports_dir: Path,
            run_id: str, redactor: Redactor, planned: list[dict[str, Any]] | PlanText) -> None:
    """The merged run's folder (run.json, plan.json, cases.json), replacing an earlier merge
    of the name whole (only now: an artifact that cannot be read leaves it as it was)."""
    cases = {label: case for s in sources for label, case in s.cases.items()}
    target = reports_dir / "runs" / run_id
    aside = _set_aside(target, reports_dir) if (target / META).exists() else None
    try:
        RunStore.create(reports_dir, {
            "merged_from": [{"run_id": s.run_id, "shard": m.get("shard")}
                            for s, m in zip(sources, metas, strict=True)],
            "matrix": metas[0].get("matrix"), "harness": metas[0].get("harness"),
            "planned": planned, "executor": {"executor": "merge"},
            "expect": recorded_rules(metas),
            # Every shard planned from the same lock: the first one's resolutions are the run's.
            "releases": metas[0].get("releases") or [], "set": metas[0].get("set") or {},
            "kind": run_kind(metas[0]),
        }, run_id=run_id, cases=cases, redactor=redactor)
    except BaseException:
        if aside is not None:  # the earlier merge back in its place, nothing of this one
            shutil.rmtree(target, ignore_errors=True)
            aside.replace(target)
        raise
    finally:
        _remove_replaced(reports_dir)


#: Where an earlier merge of the same name goes while it is replaced: no run's folder.
_REPLACED = ".replaced"


def _set_aside(target: Path, reports_dir: Path) -> Path | None:
    """``target`` moved out of ``runs/`` (a rename: no reader sees half a run), to be removed
    later; where it cannot be renamed, removed in place."""
    folder = reports_dir / _REPLACED
    place = folder / f"{os.getpid()}-{time.time_ns()}"
    try:
        folder.mkdir(exist_ok=True)
        target.replace(place)
    except OSError:
        shutil.rmtree(target)
        return None
    return place


def _remove_replaced(reports_dir: Path) -> None:
    """What is set aside removed, with what a merge killed meanwhile left there."""
    folder = reports_dir / _REPLACED
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.rmdir()  # (only where empty: another merge's may be under way)


class _Gaps:
    """What a MISSING line is made of: the plan's cells, and which shard was to run each
    (every shard's plan, read only when there is a gap)."""

    def __init__(self, sources: Sequence[RunStore], metas: Sequence[dict[str, Any]]) -> None:
        self.cells = {cell["cell_id"]: cell for cell in _full_plan(sources, metas)}
        self.shard_of: dict[str, Any] = {c["cell_id"]: m.get("shard") for s, m in zip(
            sources, metas, strict=True) for c in s.planned()}
        # Shards 1..S of N hold cells (S: the plan's hardware and environment pairs, at most
        # N; ``plan.shard``): where one of them is not here, a cell no shard planned is its.
        shards = {str(m["shard"]) for m in metas if m.get("shard")}
        count = {label.partition("/")[2] for label in shards}
        held = len({(c["hardware"], c["environment"]) for c in self.cells.values()})
        absent = [f"{i}/{n}" for n in count if len(count) == 1 and n.isdigit()
                  for i in range(1, min(int(n), held) + 1) if f"{i}/{n}" not in shards]
        self.absent = absent[0] if len(absent) == 1 else None

    def missing(self, cell_id: str, run_id: str) -> CellResult:
        """The cell's MISSING line: the shard that planned it reported without it, else the
        shard that is not here was to run it."""
        cell, shard = self.cells[cell_id], self.shard_of.get(cell_id)
        decision = classify(Ending(kind="missing_shard", shard=shard or self.absent,
                                   reason="reported without it" if shard else ""))
        return CellResult(
            run_id=run_id, cell_id=cell["cell_id"], environment=cell["environment"],
            values=cell.get("values", {}), env_key="", backend=cell.get("backend", ""),
            case_id=cell["case"], variant=cell["variant"], nodeid=cell.get("nodeid", ""),
            hardware_target=cell["hardware"], outcome=decision.outcome, reason=decision.reason,
            finished_at=0.0)


def _plan_text(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]]
               ) -> tuple[PlanText, list[str]] | None:
    """The first shard's plan as written, and its cells' ids, where that text means what
    ``_full_plan`` gives: every record a shard, no cell twice, nothing msgspec refuses."""
    if not all(meta.get("shard") for meta in metas):
        return None
    try:
        text = (sources[0].run_dir / FULL_PLAN).read_bytes()
        order = [cell.cell_id for cell in _PLANNED.decode(text.decode())]  # the ids alone
    except (OSError, *REFUSED):
        return None
    if not order or len(set(order)) < len(order):
        return None
    return PlanText(text, len(order)), order


class _Planned(msgspec.Struct):
    cell_id: str


_PLANNED = msgspec.json.Decoder(list[_Planned])


def _full_plan(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """The plan the shards were cut from (the first shard's copy there is), in plan order,
    with any cell an unsharded record planned that it lacks."""
    cells: dict[str, dict[str, Any]] = {}
    shards = (s for s, m in zip(sources, metas, strict=True) if m.get("shard"))
    for cell in next(filter(None, (s.full_plan() for s in shards)), []):
        cells.setdefault(cell["cell_id"], cell)
    for source, meta in zip(sources, metas, strict=True):
        if not meta.get("shard"):  # unsharded records and earlier merges: their own plan
            for cell in source.planned():
                cells.setdefault(cell["cell_id"], cell)
    return list(cells.values())


class _Relocate:
    """A result with its log linked (or copied) beside it, at the same relative path; each
    shard's logs listed once and what was linked remembered."""

    def __init__(self, out: RunStore) -> None:
        self.out = f"{out.run_dir}"
        self.logs: dict[Path, frozenset[str]] = {}  # a shard's folder -> its names in logs/
        self.linked: set[str] = set()

    def __call__(self, source: RunStore, result: CellResult) -> CellResult:
        log = result.log
        if not log:
            return result
        if log.startswith("/"):  # absolute (records before format 2; os.path.isabs, in C)
            src, relative = log, f"logs/{os.path.basename(log)}"  # noqa: PTH119
            there = os.path.isfile(src)  # noqa: PTH113
        else:
            folder, _, name = log.rpartition("/")
            listed = self.logs.get(source.run_dir)
            if listed is None:
                listed = self.logs[source.run_dir] = source.log_names()
            src, relative = f"{source.run_dir}/{log}", log
            there = name in listed if folder == "logs" else os.path.isfile(src)  # noqa: PTH113
        if not there:  # the log never came with the artifact
            return result.replace(log=None)
        if relative not in self.linked:  # a batch's shared log: once
            self.linked.add(relative)
            _link(src, f"{self.out}/{relative}")
        return result if relative == log else result.replace(log=relative)


def _link(src: str, target: str) -> None:
    """``src`` at ``target``: a hard link, else a copy; a file already there is kept."""
    for _ in range(2):
        try:
            os.link(src, target)
        except FileExistsError:
            return
        except FileNotFoundError:  # its folder is not there yet (logs/ of a nested path)
            os.makedirs(os.path.dirname(target), exist_ok=True)  # noqa: PTH103,PTH120
            continue
        except OSError:  # another filesystem
            shutil.copy2(src, target)
        return


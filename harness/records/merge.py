"""One run from many: the run folders of a plan's shards (CI artifacts, wherever they were
downloaded) merged into a single record.

Every cell of the plan is in the result once: the record of the shard that ran it, or MISSING
when no shard reported it. Two records of one cell (a shard run twice) are resolved by attempt
and then time, with a warning. Merging the same folders again gives the same record.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core.errors import UsageError
from harness.core.results import CellResult, Outcome
from harness.records.expect import recorded_rules
from harness.records.layout import CASES, META, RESULTS
from harness.records.select import choose_records
from harness.records.store import RunStore
from harness.run.classify import Ending, classify


@dataclass
class MergeReport:
    store: RunStore
    cells: int = 0
    missing: int = 0
    conflicts: list[str] = field(default_factory=list)
    results: list[CellResult] = field(default_factory=list)  # as written, so none re-reads them


def merge_runs(sources: Sequence[RunStore], reports_dir: Path, *, run_id: str | None = None,
               warn: Callable[[str], None] = lambda _: None) -> MergeReport:
    if not sources:
        raise UsageError("merge: name at least one run folder")
    metas = [s.meta for s in sources]
    planned = _full_plan(sources, metas)
    run_id = run_id or "merged-" + hashlib.sha256(
        json.dumps(sorted(s.run_id for s in sources)).encode()).hexdigest()[:10]
    target = reports_dir / "runs" / run_id
    if target.resolve() in {s.run_dir for s in sources}:
        raise UsageError(f"merge: {target} is one of the runs being merged")
    if (target / META).exists():  # merging again replaces the earlier merge, whole
        shutil.rmtree(target)
    chosen, conflicts = choose_records(sources, warn)
    report = MergeReport(store=RunStore.create(reports_dir, {
        "merged_from": [{"run_id": s.run_id, "shard": m.get("shard")}
                        for s, m in zip(sources, metas, strict=True)],
        "matrix": metas[0].get("matrix"), "harness": metas[0].get("harness"),
        "planned": planned, "executor": {"executor": "merge"},
        "expect": recorded_rules(metas),
        # Every shard planned from the same lock: the first one's resolutions are the run's.
        "releases": metas[0].get("releases") or [], "set": metas[0].get("set") or {},
    }, run_id=run_id, cases=_union(s.cases for s in sources)))
    out = report.store
    for source in sources:  # what each environment held, from whichever shard built it
        for path in (source.run_dir / "envs").glob("*.json"):
            _link(str(path), f"{out.run_dir}/envs/{path.name}")
    shard_of: dict[str, Any] | None = None  # which shard was to run a cell: read for a gap
    lines: list[CellResult] = []
    linker = _Linker()
    try:
        relocate = _Relocate(out, linker)
        for cell in planned:
            found = chosen.get(cell["cell_id"])
            if found is None or found[1].outcome is Outcome.MISSING:  # also a gap merged again
                if shard_of is None:  # every shard's plan: most of a fleet's merge, when whole
                    shard_of = {c["cell_id"]: m.get("shard") for s, m in zip(
                        sources, metas, strict=True) for c in s.planned()}
                report.missing += 1
                lines.append(_missing(cell, out.run_id, shard_of.get(cell["cell_id"])))
            else:
                lines.append(relocate(*found))
        known = {c["cell_id"] for c in planned}
        # Ran, though no plan here names it: after the planned ones, in the order a report sorts
        # them, so the record is in report order (run.json ``ordered_cells``).
        lines += sorted((relocate(*found) for cell_id, found in chosen.items()
                         if cell_id not in known), key=lambda r: (r.logical_key, r.cell_id))
    finally:
        linker.close()  # the logs in place before the lines that point at them
    out.extend(lines)  # the merged record is written once, whole
    out.update_meta(ordered_cells=len(lines))
    report.cells = len(lines)
    # What was written, for the report and the verdicts: these objects, unless the writer
    # redacted some of them on the way (a secret of this machine's): then the record itself.
    report.results = lines if not out.redactor.secrets else out.results()
    report.conflicts = conflicts
    return report


def _full_plan(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """The plan the shards were cut from, in plan order. Every shard of one plan records the
    same one: it is read from the first shard that has it (reading 64 copies of a fleet's plan
    is most of a merge), plus any cell another record planned that it lacks."""
    cells: dict[str, dict[str, Any]] = {}
    shards = [s for s, m in zip(sources, metas, strict=True) if m.get("shard")]
    for cell in (shards[0].full_plan() or []) if shards else []:
        cells.setdefault(cell["cell_id"], cell)
    for source, meta in zip(sources, metas, strict=True):
        if not meta.get("shard"):  # unsharded records and earlier merges: their own plan
            for cell in source.planned():
                cells.setdefault(cell["cell_id"], cell)
    return list(cells.values())


class _Relocate:
    """A result with its log linked (or copied) beside it, at the same relative path. On
    strings, with each shard's logs listed once and what was linked remembered (a stat per
    log was a third of a fleet's merge: 100,000 logs)."""

    def __init__(self, out: RunStore, linker: _Linker) -> None:
        self.out = f"{out.run_dir}"
        self.linker = linker
        self.logs: dict[str, frozenset[str]] = {}  # run folder -> the names in its logs/
        self.linked: set[str] = set()

    def __call__(self, source: RunStore, result: CellResult) -> CellResult:
        log = result.log
        if not log:
            return result
        if os.path.isabs(log):  # noqa: PTH117  (records before format 2)
            src, relative = log, f"logs/{os.path.basename(log)}"  # noqa: PTH119
            there = os.path.isfile(src)  # noqa: PTH113
        else:
            src, relative = f"{source.run_dir}/{log}", log
            folder, _, name = log.rpartition("/")
            if folder == "logs":
                key = str(source.run_dir)
                if key not in self.logs:
                    self.logs[key] = source.log_names()
                there = name in self.logs[key]
            else:
                there = os.path.isfile(src)  # noqa: PTH113
        if not there:
            return replace(result, log=None)  # the log never came with the artifact
        if relative not in self.linked:  # a batch's shared log: once
            self.linked.add(relative)
            self.linker.link(src, f"{self.out}/{relative}")
        return result if relative == log else replace(result, log=relative)


class _Linker:
    """``_link`` on a thread of its own, while the merge goes on choosing records: a link is
    a system call, which lets the interpreter run, and a fleet's 50,000 were a sixth of its
    merge. ``close`` waits for the last one and raises the first error."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[str, str] | None] = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._work, name="merge-links", daemon=True)
        self.thread.start()

    def link(self, src: str, target: str) -> None:
        self.queue.put((src, target))

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _work(self) -> None:
        while (job := self.queue.get()) is not None:
            if self.error is None:
                try:
                    _link(*job)
                except BaseException as exc:  # raised by close(), in the merge's thread
                    self.error = exc


def _link(src: str, target: str) -> None:
    """``src`` at ``target``: a hard link where it can (same filesystem), else a copy; a file
    already there (an environment two shards built) is kept."""
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


def _missing(cell: dict[str, Any], run_id: str, shard: str | None) -> CellResult:
    decision = classify(Ending(kind="missing_shard", shard=shard))
    return CellResult(
        run_id=run_id, cell_id=cell["cell_id"], environment=cell["environment"],
        values=cell.get("values", {}), env_key="", backend=cell.get("backend", ""),
        case_id=cell["case"], variant=cell["variant"], nodeid=cell.get("nodeid", ""),
        hardware_target=cell["hardware"], outcome=decision.outcome, reason=decision.reason,
        finished_at=0.0)


def _union(cases: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for each in cases:
        out.update(each)
    return out


__all__ = ["CASES", "RESULTS", "MergeReport", "choose_records", "merge_runs"]

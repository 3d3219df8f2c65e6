"""One run from many: the run folders of a plan's shards (CI artifacts, wherever they were
downloaded) merged into a single record.

Every cell of the plan is in the result once: the record of the shard that ran it, or MISSING
when no shard reported it. Two records of one cell (a shard run twice) are resolved by attempt
and then time, with a warning. Merging the same folders again gives the same record.

A chosen line is written as its shard wrote it where the merged record would mean the same by
it (its shared values named by their content, no log lost, no secret of this machine's in it);
any other is written as ``extend`` writes a result. Logs are linked, and an earlier merge of
the name removed, in a thread beside the rest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from harness.core import jsonio
from harness.core.errors import UsageError
from harness.core.redact import Redactor
from harness.core.results import FIELDS, CellResult, Outcome, adopt
from harness.records import table
from harness.records.compare import choose
from harness.records.expect import recorded_rules
from harness.records.store import (
    DECODER,
    FULL_PLAN,
    META,
    REFUSED,
    RESULTS,
    PlanText,
    RunStore,
    check_run_id,
    content_name,
    in_place,
    read_shared,
    run_kind,
    scan_damaged,
    warn_damaged,
)
from harness.run.classify import Ending, classify

#: Links made in one batch of the thread (each batch handed over as the merge goes on).
_BATCH = 2000


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
    with ThreadPoolExecutor(max_workers=1) as pool:
        background = _Background(pool)
        try:
            report, writer = _merge(sources, reports_dir, run_id, warn, background)
            writer.close()  # the merged record is written once, whole
        finally:
            background.flush()  # (the pool's end waits for all it was given)
        out = report.store
        # Said in its report's header, as its shards' records would have said them.
        out.update_meta(ordered_cells=len(report.written),
                        **({"damaged_lines": report.damaged} if report.damaged else {}))
        report.cells = len(report.written)
        if out.redactor.secrets:  # the writer redacted some on the way: the record itself
            report.written = list(out.results())
        # Its table (what the next night compares with), while the logs are linked.
        table.write(out.run_dir, report.written, table.stamp(out.run_dir))
    for future in background.futures:
        future.result()  # what failed there, raised here
    return report


class _Background:
    """Links (a log, an environment's file) and removals run in one thread, in the order
    given, while the merge goes on."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.links: list[tuple[str, str]] = []
        self.futures: list[Future[None]] = []

    def link(self, src: str, target: str) -> None:
        self.links.append((src, target))
        if len(self.links) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        if self.links:
            self.futures.append(self.pool.submit(_link_all, self.links))
            self.links = []

    def run(self, job: Callable[[], None]) -> None:
        self.flush()
        self.futures.append(self.pool.submit(job))


def _link_all(links: list[tuple[str, str]]) -> None:
    for src, target in links:
        _link(src, target)


def _merge(sources: Sequence[RunStore], reports_dir: Path, run_id: str | None,
           warn: Callable[[str], None], background: _Background
           ) -> tuple[MergeReport, _Writer]:
    """The merged run folder, its record chosen (``report.written``, to be written by the
    writer) and its logs handed to ``background`` to link."""
    run_id = check_run_id(run_id or "merged-" + hashlib.sha256(
        json.dumps(sorted(s.run_id for s in sources)).encode()).hexdigest()[:10])
    target = reports_dir / "runs" / run_id
    if target.resolve() in {s.run_dir for s in sources}:
        raise UsageError(f"merge: {target} is one of the runs being merged")
    redactor = Redactor.from_environment()
    metas = [s.meta for s in sources]
    planned, order = _plan(sources, metas, redactor)
    # Read before any file is touched: one that cannot be read leaves an earlier merge of
    # the name as it was.
    names = _Names(redactor)
    readers = [_Read(s, names) for s in sources]
    chosen, conflicts = choose([(r, r.last_attempts()) for r in readers], warn)
    _create(sources, metas, reports_dir, run_id, redactor, planned, background)
    out = RunStore(target, redactor)
    report = MergeReport(store=out, conflicts=conflicts,
                         damaged=sum(len(r.damaged) for r in readers))
    gaps: _Gaps | None = None
    lines = report.written
    writer = _Writer(out, names)
    envs: set[str] = set()  # what each environment held, from the first shard with it
    for source in sources:
        for path in (source.run_dir / "envs").glob("*.json"):
            if path.name not in envs:
                envs.add(path.name)
                background.link(str(path), f"{out.run_dir}/envs/{path.name}")
    relocate = _Relocate(out, background)
    unread = 0  # planned cells no shard has
    for cell_id in order:
        found = chosen.get(cell_id)
        if found is None or found[1].outcome is Outcome.MISSING:  # also a gap merged again
            unread += found is None
            gaps = gaps or _Gaps(sources)
            report.missing += 1
            lines.append(writer.add(_missing(gaps.cells[cell_id], out.run_id,
                                             gaps.shard_of.get(cell_id))))
        else:
            lines.append(writer.add(relocate(*found), found[0]))
    # Ran, though no plan here names it: after the planned ones, in the order a report sorts
    # them, so the record is in report order (run.json ``ordered_cells``).
    if len(chosen) > len(order) - unread:
        known = set(order)
        extra = sorted((found for cell_id, found in chosen.items() if cell_id not in known),
                       key=lambda found: (found[1].logical_key, found[1].cell_id))
        lines += [writer.add(relocate(*found), found[0]) for found in extra]
    return report, writer


def _plan(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]], redactor: Redactor
          ) -> tuple[list[dict[str, Any]] | PlanText, list[str]]:
    """The merged run's plan as written (the first shard's text where it can be), its order."""
    passed = None if redactor.secrets else _plan_text(sources, metas)
    if passed is not None:
        return passed
    planned = _full_plan(sources, metas)
    return planned, [cell["cell_id"] for cell in planned]


def _create(sources: Sequence[RunStore], metas: Sequence[dict[str, Any]], reports_dir: Path,
            run_id: str, redactor: Redactor, planned: list[dict[str, Any]] | PlanText,
            background: _Background) -> None:
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
        background.run(lambda: _remove_replaced(reports_dir))


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

    def __init__(self, sources: Sequence[RunStore]) -> None:
        metas = [s.meta for s in sources]
        self.cells = {cell["cell_id"]: cell for cell in _full_plan(sources, metas)}
        self.shard_of: dict[str, Any] = {c["cell_id"]: m.get("shard") for s, m in zip(
            sources, metas, strict=True) for c in s.planned()}


class _Read(RunStore):
    """A shard's record as the merge reads it: each cell's last attempt, kept with its line
    where the merged record may hold that line as it is (``verbatim``): no field unknown, the
    values it names named the same by ``names`` (after its redactor), no secret in it."""

    def __init__(self, source: RunStore, names: _Names) -> None:
        super().__init__(source.run_dir, names.redactor)
        self.run_id = source.run_id
        self.names = names
        # a cell -> its last attempt, if that may be written as it is: its line and names
        self.kept: dict[str, tuple[CellResult, bytes, tuple[str, ...]]] = {}
        self.usable: dict[tuple[str, ...], bool] = {}  # names -> named the same when merged
        self.shared_lines: dict[str, bytes] = {}  # a name -> its line of shared.jsonl

    def verbatim(self, result: CellResult) -> tuple[bytes, tuple[str, ...]] | None:
        """The line ``result`` was read from and the values it names, if kept as it is."""
        kept = self.kept.get(result.cell_id)
        return kept[1:] if kept is not None and kept[0] is result else None

    def last_attempts(self) -> list[CellResult]:
        try:
            data = (self.run_dir / RESULTS).read_bytes()
        except FileNotFoundError:
            return []
        shared = self._shared_values()
        secrets = self.names.secrets
        # msgspec reads a line as json does where there is no secret to redact and no run of
        # 19 digits (``plain_numbers``: an integer past 64 bits).
        fast = not secrets and jsonio.plain_numbers(data)
        by_cell: dict[str, CellResult] = {}
        read = 0  # lines read, to tell whether one was left out (torn, not JSON)
        for line in data.split(b"\n"):
            result, exact = _decode(line, fast)
            if result is None:
                continue
            read += 1
            names = _named(result, shared)
            in_place((result,), shared)
            by_cell[result.cell_id] = result
            if exact and names is not None and self._usable(names) and not (
                    secrets and (b"\\" in line or any(x in line for x in secrets))):
                self.kept[result.cell_id] = (result, line, names)  # (a secret escaped?)
        if read != sum(map(bool, map(bytes.strip, data.split(b"\n")))):
            self.damaged = scan_damaged(self.run_dir / RESULTS, len(data))
            warn_damaged(self.damaged)
        return list(by_cell.values())

    def _usable(self, names: tuple[str, ...]) -> bool:
        usable = self.usable.get(names)
        if usable is None:  # most lines name the same few: once per distinct tuple of names
            usable = self.usable[names] = all(self.names.usable(
                n, self.shared_lines[n], self._shared_values()[n]) for n in names)
        return usable

    def _shared_values(self) -> dict[str, Any]:
        """shared.jsonl, read once, as ``RunStore`` reads it; each value's line kept too."""
        if self._shared is None:
            self._shared = {}
            for digest, value, line in read_shared(self.run_dir):
                self._shared[digest] = value
                self.shared_lines[digest] = line
        return self._shared


def _decode(line: bytes, fast: bool) -> tuple[CellResult | None, bool]:
    """A line's result (None: none, as ``RunStore.attempts`` leaves it out), and whether the
    line holds it exactly (no field unknown, every value as ``dumps`` writes it back)."""
    if fast:
        with contextlib.suppress(*REFUSED):
            return DECODER.decode(line), True
    for _, row, verbatim in jsonio.loads_lines(line):
        exact = verbatim and row.keys() <= FIELDS
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            return adopt(row), exact
    return None, False


def _named(result: CellResult, shared: dict[str, Any]) -> tuple[str, ...] | None:
    """The shared values a result just decoded names, if it names them as a merged record
    would (by a name shared.jsonl has, for a value that is not empty); else None."""
    names: tuple[str, ...] = ()
    for value in (result.fingerprint, result.hardware):  # BY_REFERENCE, in its order
        if isinstance(value, str):
            if not shared.get(value):
                return None
            names = (*names, value)
        elif value:
            return None
    return names


class _Names:
    """Which of the shards' shared names stand for the same value in the merged record (once
    redacted, one may not), and those values; checked once per distinct line."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.secrets = [s.encode() for s in redactor.secrets]
        self.values: dict[str, Any] = {}  # a usable name -> its value, as written
        self.checked: dict[bytes, bool] = {}  # a line of shared.jsonl -> usable

    def usable(self, name: str, line: bytes, value: Any) -> bool:
        usable = self.checked.get(line)
        if usable is None:
            value = self.redactor.obj(value)
            usable = self.checked[line] = content_name(value) == name
            if usable:
                self.values.setdefault(name, value)
        return usable


class _Writer:
    """The merged record: a chosen line as its shard wrote it (``verbatim``), else encoded by
    the store; written whole at ``close``, after the new shared values it names."""

    def __init__(self, out: RunStore, names: _Names) -> None:
        self.out = out
        self.names = names.values
        self.chunks: list[bytes] = []
        self.fresh: dict[str, Any] = {}
        self.named: set[tuple[str, ...]] = set()  # the names of the lines written as they are

    def add(self, result: CellResult, source: _Read | None = None) -> CellResult:
        kept = source.verbatim(result) if source is not None else None
        if kept is None:
            self.chunks.append(self.out.encode(result, self.fresh))
            return result
        line, names = kept
        self.chunks += (line, b"\n")
        if names not in self.named:  # once for each distinct pair of names
            self.named.add(names)
            for name in names:
                if name not in self.fresh:
                    self.out.share_named(name, self.names[name], self.fresh)
        return result

    def close(self) -> None:
        self.out.append_encoded(self.chunks, self.fresh)


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
    """The plan the shards were cut from (the first shard's copy), in plan order, with any
    cell an unsharded record planned that it lacks."""
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
    """A result with its log linked (or copied) beside it, at the same relative path, in the
    background; each shard's logs listed once and what was linked remembered."""

    def __init__(self, out: RunStore, background: _Background) -> None:
        self.out = f"{out.run_dir}"
        self.background = background
        self.logs: dict[int, tuple[str, frozenset[str]]] = {}  # a shard: its folder, logs/
        self.linked: set[str] = set()

    def __call__(self, source: _Read, result: CellResult) -> CellResult:
        log = result.log
        if not log:
            return result
        if log.startswith("/"):  # absolute (records before format 2; os.path.isabs, in C)
            src, relative = log, f"logs/{os.path.basename(log)}"  # noqa: PTH119
            there = os.path.isfile(src)  # noqa: PTH113
        else:
            folder, _, name = log.rpartition("/")
            listed = self.logs.get(id(source))
            if listed is None:
                listed = self.logs[id(source)] = (str(source.run_dir), source.log_names())
            src, relative = f"{listed[0]}/{log}", log
            there = name in listed[1] if folder == "logs" else os.path.isfile(src)  # noqa: PTH113
        if not there:  # the log never came with the artifact
            return result.replace(log=None)
        if relative not in self.linked:  # a batch's shared log: once
            self.linked.add(relative)
            self.background.link(src, f"{self.out}/{relative}")
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


def _missing(cell: dict[str, Any], run_id: str, shard: str | None) -> CellResult:
    decision = classify(Ending(kind="missing_shard", shard=shard))
    return CellResult(
        run_id=run_id, cell_id=cell["cell_id"], environment=cell["environment"],
        values=cell.get("values", {}), env_key="", backend=cell.get("backend", ""),
        case_id=cell["case"], variant=cell["variant"], nodeid=cell.get("nodeid", ""),
        hardware_target=cell["hardware"], outcome=decision.outcome, reason=decision.reason,
        finished_at=0.0)


"""Run folders: ``run.json``, ``plan.json``, ``cases.json``, ``envs/``, ``logs/`` and the
record, ``results.jsonl`` (a line per attempt, appended as it ends: a kill -9 loses no finished
cell). docs/record.md describes each file. A value thousands of lines would repeat (a
fingerprint, a machine) is written once to ``shared.jsonl``, named by the hash of its content.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import secrets
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, NamedTuple, cast, get_args

import msgspec
from msgspec.structs import force_setattr

from harness.core import atomic, jsonio
from harness.core.errors import StoreError, UsageError
from harness.core.redact import Redactor
from harness.core.results import CellResult, CellRun, Outcome, adopt, damage
from harness.core.words import plural
from harness.records import codec
from harness.records.codec import Batched, append
from harness.records.schema import CASES_SCHEMA, PLAN_CELLS, Kind, Meta, checked

RESULTS = "results.jsonl"
META = "run.json"
CASES = "cases.json"
PLAN = "plan.json"
FULL_PLAN = "full_plan.json"
SHARED = "shared.jsonl"
# run.json's "format": 2 added logical keys, case metadata, attempts, relative logs; 3 moves
# the plan out of run.json (reading a run's metadata must not parse it); 4 writes each line's
# fingerprint and machine once, to shared.jsonl.
FORMAT = 4
#: The fields a line may hold by reference (the hash of a value in shared.jsonl).
BY_REFERENCE = ("fingerprint", "hardware")
#: What a run was for (``schema.Kind``); a record without one reads as nightly.
KINDS: tuple[str, ...] = get_args(Kind)
NIGHTLY = "nightly"
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

EVENTS = "events.jsonl"  # what cells' processes said, a line per event (``RunStore.record``)


@dataclass(frozen=True)
class PlanText:
    """A plan file's JSON text and its number of cells (a merge writes a shard's as it is)."""

    text: bytes
    cells: int


class RunStore:
    def __init__(self, run_dir: Path, redactor: Redactor | None = None) -> None:
        self.run_dir = run_dir.resolve()
        self.run_id = run_dir.name
        # Every write goes through it: a token in a log or a reason never reaches the disk.
        self.redactor = redactor or Redactor.from_environment()
        # id(value) -> (value, hash) of the values in shared.jsonl (kept, so no id is reused)
        self._written: dict[int, tuple[Any, str]] = {}
        self._shared: dict[str, Any] | None = None  # hash -> value, read once
        self.upto: int | None = None  # the record's first bytes alone (``as_of``)
        # The record's lines left out by the last reading (``attempts``), and whether that
        # reading keeps quiet about them (its caller names them: a report's header).
        self.damaged: list[Damaged] = []
        self.quiet = False
        self._tail_ended = False  # whether the record ends in a newline: checked once
        self._recorded = Batched(self.run_dir / RESULTS)  # what ``record`` appends
        self._events = Batched(self.run_dir / EVENTS)  # the events of what it records
        self._logs: set[str] = set()  # the logs ``record`` wrote

    @classmethod
    def create(cls, reports_dir: Path, meta: dict[str, Any], *, run_id: str | None = None,
               cases: dict[str, Any] | None = None, redactor: Redactor | None = None
               ) -> RunStore:
        """A new run folder. ``run_id`` names it (a CI job names its shard)."""
        run_id = check_run_id(run_id or time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2))
        store = cls(reports_dir / "runs" / run_id, redactor)
        if (store.run_dir / META).exists():
            raise UsageError(f"run {run_id!r} already exists under {reports_dir / 'runs'}; "
                             f"continue it with --resume {run_id}")
        try:
            for sub in ("logs", "envs"):
                (store.run_dir / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # --reports names a file, /dev/null, a read-only place
            raise UsageError(f"--reports {reports_dir}: cannot make a run folder there: "
                             f"{exc.strerror}") from None
        store.write_json(CASES, cases or {})
        meta = dict(meta)
        planned, full = meta.pop("planned", []), meta.pop("full_plan", None)
        if isinstance(planned, PlanText):  # written elsewhere (redacted there, if need be)
            atomic.write_bytes(store.run_dir / PLAN, planned.text)
            cells = planned.cells
        else:
            store.write_json(PLAN, planned, indent=None)
            cells = len(planned)
        if full is not None:
            store.write_json(FULL_PLAN, full, indent=None)
        store.write_json(META, {"run_id": store.run_id, "format": FORMAT,
                                "created": time.time(), "cells": cells, **meta})
        return store

    @classmethod
    def open(cls, reports_dir: Path, run_id: str = "latest",
             redactor: Redactor | None = None) -> RunStore:
        """A run by id under ``reports_dir``, ``latest``, or a run folder's own path."""
        runs = reports_dir / "runs"
        if run_id == "latest":
            latest = latest_run(reports_dir)
            if latest is None:
                raise StoreError(f"no runs under {runs}")
            return cls(latest, redactor)
        for candidate in (runs / run_id, Path(run_id)):
            if (candidate / META).is_file():
                store = cls(candidate, redactor)
                store.meta  # noqa: B018  (a damaged run.json is an error before any other read)
                return store
        raise StoreError(f"no run {run_id!r} under {runs} (nor a run folder at that path)")

    @property
    def meta(self) -> dict[str, Any]:
        return _checked_meta(self.run_dir / META)

    def planned(self) -> list[dict[str, Any]]:
        """The cells this run was to run (a shard: its own), in plan order."""
        return self._plan(PLAN, "planned") or []

    def full_plan(self) -> list[dict[str, Any]] | None:
        """A shard's whole plan (what a merge of the shards must cover); None if not a shard."""
        return self._plan(FULL_PLAN, "full_plan")

    def _plan(self, name: str, key: str) -> list[dict[str, Any]] | None:
        path = self.run_dir / name  # (format 2 kept the plan inline, in run.json)
        return cast("list[dict[str, Any]] | None",
                    _load(path) if path.is_file() else self.meta.get(key))

    @property
    def cases(self) -> dict[str, Any]:
        """Case metadata by ``case::variant`` (empty for runs recorded before format 2)."""
        path = self.run_dir / CASES
        return checked(path, _load(path), CASES_SCHEMA) if path.is_file() else {}

    def update_meta(self, **changes: Any) -> None:
        self.write_json(META, {**self.meta, **changes})

    def write_json(self, name: str, data: Any, *, indent: int | None = 1) -> None:
        """Atomic: a reader sees the old file or the new one, never half of one."""
        path = self.run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = self.redactor.obj(data)
        if indent is None:  # a plan: tens of MB for a large matrix
            atomic.write_bytes(path, jsonio.dumps(data))
        else:
            atomic.write_text(path, json.dumps(data, indent=indent, default=str))

    def record(self, run: CellRun) -> CellResult:
        """Keep what a cell run returned: log, events and fingerprint, then the line that points
        at them (a suite's tests before its session's); fsynced in a batch (``sync``)."""
        log = None
        stem = run.log_name or run.result.cell_id
        stem = stem if run.result.attempt == 1 else f"{stem}.{run.result.attempt}"
        name = f"logs/{stem}.log"
        if run.log:
            # Cells of one process share its log: each record rewrites it with what the
            # process had written by then, which only grows.
            atomic.write_bytes(self.run_dir / name, self.redactor.data(run.log))
            log = name
            self._logs.add(log)
        elif run.log_name and (name in self._logs or (self.run_dir / name).is_file()):
            log = name  # a suite's test: its session's log, written already
        for child in run.children:  # a suite's tests, pointing at their session's log
            self._keep(child, log)
        return self._keep(run, log)

    def _keep(self, run: CellRun, log: str | None) -> CellResult:
        """The run's events and fingerprint, then its result line (pointing at ``log``)."""
        result = run.result if log is None else run.result.replace(log=log)
        if self.redactor.secrets:
            result = CellResult.from_dict(self.redactor.obj(result.to_dict()))
        if run.events:  # one file for the run: a suite's thousands of tests are not a file each
            self._events.append(b"".join(
                jsonio.dumps({"cell_id": result.cell_id, "attempt": result.attempt,
                              **self.redactor.obj(e)}) + b"\n" for e in run.events))
        if run.fingerprint and not (self.run_dir / "envs" / f"{result.env_key}.json").exists():
            self.write_json(f"envs/{result.env_key}.json", run.fingerprint)
        self.extend([result], batched=True)
        return result

    def sync(self) -> None:
        """The lines ``record`` wrote, fsynced (at the end of a run, or when it stops)."""
        self._events.sync()
        self._recorded.sync()

    def append(self, result: CellResult) -> None:
        self.extend([result])

    def extend(self, results: Sequence[CellResult], *, batched: bool = False) -> None:
        """Append the results' lines, after the new shared values they name: one write, one
        fsync (``batched``: fsynced with what ``record`` writes, at ``sync``)."""
        fresh: dict[str, Any] = {}
        lines = b"".join([self._encode(r, fresh) for r in results])
        if fresh:  # first, and fsynced, so no line points at a value that is not there
            append(self.run_dir / SHARED, b"".join(
                jsonio.dumps([digest, value]) + b"\n" for digest, value in fresh.items()))
        if not self._tail_ended:
            self._end_torn_tail()
        if batched:
            self._recorded.append(lines)
        else:
            append(self.run_dir / RESULTS, lines)

    def _encode(self, result: CellResult, fresh: dict[str, Any]) -> bytes:
        """``result``'s line, its fields at their default left out; the values it names that
        shared.jsonl lacks are added to ``fresh``."""
        named = {name: self._share(value, fresh)
                 for name in BY_REFERENCE if (value := getattr(result, name))}
        if named:
            result = result.replace(**named)
        if not self.redactor.secrets:
            with contextlib.suppress(TypeError, ValueError, msgspec.EncodeError, RecursionError):
                return ENCODER.encode(result) + b"\n"
        # A secret to redact, or a value msgspec does not write (as jsonio.dumps writes it).
        try:
            data = self.redactor.obj(msgspec.to_builtins(result, enc_hook=str))
            return jsonio.dumps(data) + b"\n"
        except RecursionError:  # a hand-edited line nested past what JSON writers go
            raise StoreError(f"{result.cell_id}: a value nested too deep to write") from None

    def _end_torn_tail(self) -> None:
        """A record whose last line was torn (killed mid-write, resumed) gets its newline
        before this store appends, so that no line is glued to it."""
        self._tail_ended = True
        try:
            with open(self.run_dir / RESULTS, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                last = fh.read(1)
        except OSError:  # none yet, or empty
            return
        if last != b"\n":
            append(self.run_dir / RESULTS, b"\n")

    def _share(self, value: Any, fresh: dict[str, Any]) -> str:
        """The hash naming ``value`` in shared.jsonl, added to ``fresh`` the first time; each
        object hashed once."""
        seen = self._written.get(id(value))
        if seen is not None and seen[0] is value:
            return seen[1]
        redacted = self.redactor.obj(value)
        digest = content_name(redacted)
        if self._shared is None:
            self._shared = dict(read_shared(self.run_dir))
        if digest not in self._shared:
            self._shared[digest] = fresh[digest] = redacted
        self._written[id(value)] = (value, digest)
        return digest

    def as_of(self, size: int | None, *, quiet: bool = False) -> RunStore:
        """This run as its record was at ``size`` bytes (None: as it is when read), whatever
        is appended meanwhile. ``quiet``: its damaged lines not warned of (the caller does)."""
        frozen = copy.copy(self)
        frozen.upto = size
        frozen.quiet = quiet
        return frozen

    def attempts(self) -> list[CellResult]:
        """Every recorded attempt, in order: a line decoded against the result's schema, else
        read as JSON (``adopt``); a damaged line is left out, kept in ``damaged``, warned of."""
        path = self.run_dir / RESULTS
        self.damaged = []
        out: list[CellResult] = []
        try:
            for number, line in enumerate(codec.lines(path, self.upto), 1):
                try:
                    out.append(DECODER.decode(line))
                except REFUSED:
                    if line.strip():
                        found = _adopted(line)
                        if isinstance(found, str):
                            self.damaged.append(Damaged(path, number, found))
                        else:
                            out.append(found)
        except FileNotFoundError:
            return []
        except OSError as exc:  # a folder, a file this user may not read
            raise StoreError(f"{path}: unreadable: {exc.strerror}") from None
        shared = dict(read_shared(self.run_dir))
        lacking = 0  # lines naming a value shared.jsonl lacks (lost, torn, hand-edited)
        for row in out:  # the values named put in place ({} for a name shared.jsonl lacks)
            if row.fingerprint.__class__ is str:
                if (value := shared.get(row.fingerprint)) is None:
                    lacking, value = lacking + 1, {}
                force_setattr(row, "fingerprint", value)
            if row.hardware.__class__ is str:
                if (value := shared.get(row.hardware)) is None:
                    lacking, value = lacking + 1, {}
                force_setattr(row, "hardware", value)
        if lacking and self.run_dir / SHARED not in _SAID:
            _SAID.add(self.run_dir / SHARED)
            print(f"harness: warning: {self.run_dir / SHARED}: lacks {lacking} values "
                  f"{RESULTS} names (fingerprints, machines); read as unknown", file=sys.stderr)
        if self.damaged and not self.quiet:
            warn_damaged(self.damaged)
        return out

    def results(self) -> list[CellResult]:
        """Every cell once: its last attempt, at its first attempt's place."""
        return list({record.cell_id: record for record in self.attempts()}.values())

    def log_names(self) -> frozenset[str]:
        """The file names in logs/ (listed once, not a stat per cell)."""
        try:
            return frozenset(os.listdir(self.run_dir / "logs"))  # noqa: PTH208  (names only)
        except OSError:
            return frozenset()


def _load(path: Path) -> Any:
    """A JSON file of the record; a StoreError in one line where it cannot be read."""
    try:
        return jsonio.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable: {exc}") from None


@contextlib.contextmanager
def plan_cells(*stores: RunStore) -> Iterator[None]:
    """Around a reading of the stores' plans: a cell of the wrong shape (not an object, a key
    missing or of another type) is a StoreError naming file and field, found by checking the
    plans only then (good ones pay no pass more)."""
    try:
        yield
    except (TypeError, KeyError, AttributeError):
        for path in (s.run_dir / name for s in stores for name in (PLAN, FULL_PLAN)):
            if path.is_file():
                checked(path, _load(path), PLAN_CELLS)
        raise


def check_run_id(run_id: str) -> str:
    """``run_id``, if it may name a run folder (no path in it); else a UsageError."""
    if not RUN_ID.fullmatch(run_id):
        raise UsageError(f"--run-id {run_id!r}: use up to 128 letters, digits, '.', '_' and "
                         "'-', a letter or digit first")
    if run_id == "latest":  # `report latest`, `--resume latest` would mean another run
        raise UsageError("--run-id latest: that name means the newest run; choose another")
    return run_id


def open_runs(reports_dir: Path, runs: Sequence[str], command: str) -> list[RunStore]:
    """The runs named; one named twice (by id, folder or ``latest``) would count twice: refused."""
    stores = [RunStore.open(reports_dir, run) for run in runs]
    if len({s.run_dir for s in stores}) < len(stores):
        raise UsageError(f"{command}: a run is named twice")
    return stores


def content_name(value: Any) -> str:
    """The name of a value in shared.jsonl: the hash of its content."""
    text = json.dumps(value, default=str, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_done(result: CellResult) -> bool:
    """No re-run on resume: not NOT_RUN (other hardware may run it), not lost to the machine."""
    return result.outcome is not Outcome.NOT_RUN and not result.infra


def read_shared(run_dir: Path) -> Iterator[tuple[str, Any]]:
    """A run's shared.jsonl: each name and value (a torn or broken line skipped; an unreadable
    file read as none: ``attempts`` warns of the values it lacks)."""
    try:
        raw = (run_dir / SHARED).read_bytes()
    except OSError:
        return
    for _, pair, _ in jsonio.loads_lines(raw):
        with contextlib.suppress(ValueError, TypeError):
            digest, value = pair
            yield str(digest), value


def _adopted(line: bytes) -> CellResult | str:
    """A line the schema refuses, read as JSON; else why it is no result (``damage``)."""
    try:
        row = jsonio.loads(line)
    except (ValueError, RecursionError):
        return "not JSON" if line.endswith(b"\n") else "torn (its end never written)"
    return damage(row) or adopt(row)


DECODER = msgspec.json.Decoder(CellResult)
ENCODER = msgspec.json.Encoder(enc_hook=str)
#: What ``DECODER`` raises for a line it does not take (RecursionError: nested deeper than
#: msgspec goes, where orjson still reads it).
REFUSED = (msgspec.DecodeError, UnicodeDecodeError, RecursionError)


class Damaged(NamedTuple):
    """A line of a record that is no result (torn, not JSON, a field of another type, an
    outcome the harness does not know): left out by every reader, named and counted."""

    path: Path
    line: int  # from 1
    why: str

    def __str__(self) -> str:
        return f"{self.path}: line {self.line}: {self.why}"


#: How many damaged lines of one reading are named; the rest are counted.
NAMED = 10
_WARNED: set[Damaged] = set()  # (a command reading one record twice says each once)


def warn_damaged(found: Sequence[Damaged]) -> None:
    """A warning on stderr for each of the first ``NAMED`` (once a process), then a count."""
    found = [d for d in found if d not in _WARNED]
    _WARNED.update(found)
    for damaged in found[:NAMED]:
        print(f"harness: warning: {damaged}; the line is left out", file=sys.stderr)
    if len(found) > NAMED:
        print(f"harness: warning: {len(found) - NAMED} more damaged lines left out",
              file=sys.stderr)


def said(count: int) -> str:
    """The report header's words for ``count`` damaged lines ("" for none)."""
    return f"{plural(count, 'damaged line')} left out" if count else ""


def _checked_meta(path: Path) -> dict[str, Any]:
    """run.json, if its fields have the types readers rely on and a format this harness
    reads; else a StoreError naming the file and the field."""
    data = checked(path, _load(path), Meta)
    if (data.get("format") or 0) > FORMAT:
        raise StoreError(f"{path}: format {data['format']}: written by a newer harness (this "
                         f"one reads up to {FORMAT})")
    return cast("dict[str, Any]", data)


_SAID: set[Path] = set()  # the files a warning named (each said once a process)


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    """A run folder's run.json, or None where there is none; a damaged one is warned of (once)
    and read as none."""
    path = run_dir / META
    if not path.exists():  # (nor a folder there): no run
        return None
    try:
        return _checked_meta(path)
    except StoreError as exc:
        if path not in _SAID:
            _SAID.add(path)
            print(f"harness: warning: {exc}; the run is left out", file=sys.stderr)
        return None


@dataclass(frozen=True)
class Run:
    """A run folder, its run.json, and its place among runs: when it was created (run.json
    ``created``), ties broken by its id; not a file's mtime, which a copy or a restore changes.
    """

    path: Path
    meta: dict[str, Any]
    order: tuple[float, str]

    @property
    def line(self) -> tuple[str, str]:
        return lineage(self.meta)


def read_run(run_dir: Path) -> Run | None:
    """A run folder whose run.json is readable (``read_meta``); else None."""
    meta = read_meta(run_dir)
    return None if meta is None else Run(run_dir, meta, (meta.get("created") or 0.0, run_dir.name))


def list_runs(folder: Path, *, with_results: bool = False, required: bool = False
              ) -> list[Run]:
    """The runs under ``folder`` (none if missing), oldest first; ``with_results``: only those
    that recorded a result; ``required``: a UsageError where there is no such folder."""
    if not folder.is_dir():
        if required:
            raise UsageError(f"no folder of runs at {folder}")
        return []
    found = [read_run(path) for path in folder.iterdir()
             if not with_results or (path / RESULTS).is_file()]
    return sorted(filter(None, found), key=attrgetter("order"))


def run_kind(meta: dict[str, Any] | None) -> str:
    """What a run was for (``KINDS``); a record without a kind is a nightly."""
    kind = (meta or {}).get("kind")
    return kind if kind in KINDS else NIGHTLY


def lineage(meta: dict[str, Any] | None) -> tuple[str, str]:
    """The line of runs a run belongs to: its matrix file (normalised) and its kind."""
    matrix = (meta or {}).get("matrix")
    return (os.path.normpath(str(matrix)) if matrix else "", run_kind(meta))


def latest_run(reports_dir: Path, line: tuple[str, str] | None = None,
               other_than: Path | None = None) -> Path | None:
    """The newest run under ``reports_dir``; ``line``: of that matrix and kind (``lineage``)."""
    found = [run.path for run in list_runs(reports_dir / "runs") if line in (None, run.line)
             and (other_than is None or run.path.resolve() != other_than.resolve())]
    return found[-1] if found else None


def newest_first(reports_dir: Path) -> list[Path]:
    """Runs that recorded results, newest first (where earlier durations are looked up)."""
    return [run.path for run in reversed(list_runs(reports_dir / "runs", with_results=True))]


def previous_run(reports_dir: Path, current: Path) -> Path | None:
    """The newest nightly run of the same matrix and slice (filters, shard) created before
    ``current``; for a bump (``--set``): of its slice without one, else the newest full run."""
    mine = read_run(current)
    if mine is None:
        return None
    earlier = [run for run in list_runs(reports_dir / "runs", with_results=True)
               if run.order < mine.order and run.line == (mine.line[0], NIGHTLY)]
    wanted = [_scope(mine.meta)]
    if mine.meta.get("set"):
        wanted = [_scope({**mine.meta, "set": {}}), _scope({})]
    for want in wanted:
        found = [run.path for run in earlier if _scope(run.meta) == want]
        if found:
            return found[-1]
    return None


def _scope(meta: dict[str, Any]) -> str:
    """What part of the matrix a run covered: its filters, shard and what --set replaced."""
    filters = {k: v for k, v in (meta.get("filters") or {}).items() if v}
    # Older records have no "set": the same scope as an empty one (dropped when empty).
    sets = meta.get("set") or {}
    return json.dumps([filters, meta.get("shard")] + ([sets] if sets else []), sort_keys=True)

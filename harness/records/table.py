"""A run's table: one row per cell's last attempt, in ``cells.sqlite`` beside the record
(docs/record.md has the schema), written when a run or a merge ends and read by every reader
of runs; one made from an older state of the record (or none) is made again on first read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from operator import itemgetter
from pathlib import Path
from typing import Any

from harness.core import atomic
from harness.core.results import CellResult, Outcome, as_mapping
from harness.records.store import RESULTS, RunStore

CELLS = "cells.sqlite"
FORMAT = "4"
_CHECKED = "text not null check (outcome in ({}))".format(", ".join(f"'{o}'" for o in Outcome))
#: Every column of ``cells``, in order, with its SQL type and constraint.
COLUMNS = (
    ("run_id", "text not null"), ("cell_id", "text not null"),
    ("environment", "text not null"), ("case_id", "text not null"),
    ("variant", "text not null"), ("hardware_target", "text not null"), ("outcome", _CHECKED),
    ("signature", "text"), ("reason", "text not null"), ("duration", "real not null"),
    ("attempt", "integer not null"), ("finished_at", "real not null"),
    ("env_key", "text not null"), ("backend", "text not null"), ("nodeid", "text"),
    ("node", "text not null"), ("gpu", "integer"), ("log", "text"),
    ("infra", "integer not null check (infra in (0, 1))"), ("parent", "text not null"),
    ("caveat", "text not null"), ("axes", "text not null"), ("versions", "text not null"),
    ("freeze_sha256", "text"))
NAMES = tuple(name for name, _ in COLUMNS)
#: The columns an environment's cells share: kept once, in ``environments``.
SHARED = ("run_id", "environment", "env_key", "backend", "axes", "versions", "freeze_sha256")
_OWN = tuple(n for n in NAMES if n not in SHARED)
_SHARED_AT, _OWN_AT = (itemgetter(*map(NAMES.index, names)) for names in (SHARED, _OWN))
_NODEID, _VARIANT = _OWN.index("nodeid"), _OWN.index("variant")
_TYPES = dict(COLUMNS)
#: The columns a cell's logical key is made of; with its outcome.
KEYED = ("environment", "case_id", "variant", "hardware_target")
OUTCOMES = (*KEYED, "outcome")
DURATIONS = ("cell_id", "duration")
# ``results``: a cell's own columns, its environment's by number; a suite's test, whose node
# id is its variant, holds none (null). ``cells``: the view of every column.
SCHEMA = (
    "create table meta (name text primary key, value text not null) strict;\n"
    "create table environments (\n  env integer primary key,\n  "
    + ",\n  ".join(f"{n} {_TYPES[n]}" for n in SHARED) + "\n) strict;\n"
    "create table results (\n  place integer primary key,\n  "
    "env integer not null references environments,\n  "
    + ",\n  ".join(f"{n} {_TYPES[n]}" for n in _OWN) + "\n) strict;\n"
    "create view cells as select place, "
    + ", ".join("coalesce(nodeid, variant) as nodeid" if n == "nodeid" else n for n in NAMES)
    + " from results join environments using (env);\n")

#: One letter an outcome: a run's outcomes in order, kept as one text in the table's meta.
LETTER = {Outcome.PASS: "P", Outcome.REPRODUCED: "R", Outcome.FAIL: "F", Outcome.SKIP: "S",
          Outcome.ERROR: "E", Outcome.TIMEOUT: "T", Outcome.CRASH: "C", Outcome.NOT_RUN: ".",
          Outcome.MISSING: "?", Outcome.FLAKY: "~"}

Key = tuple[str, str, str]
Stamp = tuple[int, int]  # the record's size and modification time (ns)
_OUTCOME = {str(o): o for o in Outcome}


@dataclass(frozen=True)
class Cells:
    """The ``columns`` of a run's table, one tuple a cell in the record's order;
    ``keys_digest``: equal for runs of the same cells in the same order."""

    columns: tuple[str, ...]
    data: list[tuple[Any, ...]]
    keys_digest: str = ""
    keys_unique: bool = False  # no logical key twice

    def __len__(self) -> int:
        return len(self.data)

    def column(self, name: str) -> list[Any]:
        at = self.columns.index(name)
        return [row[at] for row in self.data]

    def logical_keys(self) -> list[Key]:
        envs, cases, variants, targets = (self.column(n) for n in KEYED)
        labels = map("::".join, zip(cases, variants, strict=True))
        return list(zip(envs, labels, targets, strict=True))

    def outcomes(self) -> dict[Key, Outcome]:
        """Each logical key's outcome (of two cells of one key, the later row's)."""
        return dict(zip(self.logical_keys(), map(_OUTCOME.__getitem__, self.column("outcome")),
                        strict=True))

    def durations_by_cell(self) -> dict[str, float]:
        """Each cell's duration, where it has one."""
        return {c: d for c, d in zip(self.column("cell_id"), self.column("duration"),
                                     strict=True) if d}

    def rows(self) -> list[CellResult]:
        """Each cell as a result (every column read): no details nor machine, and of its
        fingerprint the key versions and freeze hash alone."""
        of: Callable[[str], dict[str, str]] = cache(json.loads)  # each distinct text once

        @cache
        def fingerprint(versions: str, freeze: str | None) -> dict[str, Any]:
            return {k: v for k, v in (("key", of(versions)), ("freeze_sha256", freeze)) if v}

        return [CellResult(
            run_id=run_id, cell_id=cell_id, environment=environment, values=of(axes),
            env_key=env_key, backend=backend, case_id=case_id, variant=variant, nodeid=nodeid,
            hardware_target=target, outcome=_OUTCOME[outcome], reason=reason,
            signature=signature, duration=duration, log=log, finished_at=finished_at,
            caveat=caveat, attempt=attempt, node=node, gpu=gpu, infra=bool(infra),
            parent=parent, fingerprint=fingerprint(versions, freeze))
            for (run_id, cell_id, environment, case_id, variant, target, outcome, signature,
                 reason, duration, attempt, finished_at, env_key, backend, nodeid, node, gpu,
                 log, infra, parent, caveat, axes, versions, freeze)
            in map(itemgetter(*map(self.columns.index, NAMES)), self.data)]


def stamp(run_dir: Path) -> Stamp | None:
    """The record's size and modification time; None where there is no record."""
    try:
        found = (run_dir / RESULTS).stat()
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


def _text(value: Any) -> str:
    """A mapping (axis values, versions) as the JSON text of a column, keys and values text."""
    return json.dumps({str(k): str(v) for k, v in as_mapping(value).items()},
                      ensure_ascii=False, separators=(",", ":"))


def _records(results: Sequence[CellResult]) -> Iterator[tuple[Any, ...]]:
    """Each result as a tuple of ``NAMES``; each fingerprint's and axis values' text worked
    out once."""
    seen: dict[int, tuple[Any, str, str | None]] = {}
    axes: dict[str, str] = {}  # axis values by their repr (each line decodes its own mapping)
    for r in results:
        fp = r.fingerprint
        found = seen.get(id(fp))
        if found is None or found[0] is not fp:
            freeze = as_mapping(fp).get("freeze_sha256")
            found = seen[id(fp)] = (fp, _text(as_mapping(as_mapping(fp).get("key"))),
                                    str(freeze) if freeze else None)
        values = axes.get(shown := repr(r.values))
        if values is None:
            values = axes[shown] = _text(r.values)
        yield (r.run_id, r.cell_id, r.environment, r.case_id, r.variant, r.hardware_target,
               str(r.outcome), r.signature, r.reason, float(r.duration), r.attempt,
               float(r.finished_at), r.env_key, r.backend, r.nodeid, r.node, r.gpu, r.log,
               int(r.infra), r.parent, r.caveat, values, found[1], found[2])


def _escaped(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row whose text UTF-8 cannot hold (a lone surrogate), with such text escaped."""
    return tuple(v.encode("utf-8", "backslashreplace").decode() if isinstance(v, str) else v
                 for v in row)


def _digest(results: Sequence[CellResult]) -> str:
    """The digest of the cells' logical keys in order: runs of the same cells share it."""
    keys = hashlib.sha256()
    for r in results:
        keys.update(f"{r.environment}\0{r.case_id}\0{r.variant}\0{r.hardware_target}\n"
                    .encode(errors="surrogatepass"))
    return keys.hexdigest()[:32]


def write(run_dir: Path, results: Sequence[CellResult], made_from: Stamp | None) -> bool:
    """The run's table of ``results``, made from the record as ``made_from`` found it; renamed
    over the old one. Whether it was written (a read-only run folder keeps none)."""
    if made_from is None:
        return False
    path = run_dir / CELLS
    tmp = atomic.temporary(path)
    try:
        tmp.unlink(missing_ok=True)
        with contextlib.closing(sqlite3.connect(tmp)) as db:
            # Written once and renamed into place: no journal, no sync of each page.
            db.executescript("pragma journal_mode = off; pragma synchronous = off;" + SCHEMA)
            try:
                _insert(db, _records(results))
            except UnicodeEncodeError:  # a lone surrogate (by hand): kept as its escape
                db.execute("delete from results")
                db.execute("delete from environments")
                _insert(db, map(_escaped, _records(results)))
            db.executemany("insert into meta values (?, ?)", [
                ("format", FORMAT), ("record_size", str(made_from[0])),
                ("record_mtime_ns", str(made_from[1])), ("keys_digest", _digest(results)),
                ("letters", "".join([LETTER[r.outcome] for r in results])),
                ("keys_unique", str(int(len({r.logical_key for r in results})
                                        == len(results))))])
            db.commit()
        tmp.replace(path)
    except (OSError, sqlite3.Error):
        tmp.unlink(missing_ok=True)
        return False
    return True


def _insert(db: sqlite3.Connection, rows: Iterable[tuple[Any, ...]]) -> None:
    """Rows of ``NAMES`` into ``results``, each distinct environment's columns once."""
    envs: dict[tuple[Any, ...], int] = {}

    def own(row: tuple[Any, ...]) -> tuple[Any, ...]:
        shared = _SHARED_AT(row)
        found = envs.get(shared)
        if found is None:
            found = envs[shared] = len(envs)
        mine = _OWN_AT(row)
        return (found, *mine) if mine[_NODEID] != mine[_VARIANT] else (
            found, *mine[:_NODEID], None, *mine[_NODEID + 1:])

    db.executemany(f"insert into results (env, {', '.join(_OWN)}) "
                   f"values ({', '.join('?' * (len(_OWN) + 1))})", map(own, rows))
    db.executemany(f"insert into environments values ({', '.join('?' * (len(SHARED) + 1))})",
                   ((env, *shared) for shared, env in envs.items()))


def current(run_dir: Path, columns: Sequence[str] = NAMES) -> Cells | None:
    """The run's table as written, if it was made from the record as it is now (no
    ``columns``: its meta alone is read)."""
    found = _query(run_dir, f"select {', '.join(columns)} from cells order by place"
                   if columns else "")
    if found is None:
        return None
    data, meta = found
    return Cells(tuple(columns), data, meta.get("keys_digest", ""), meta.get("keys_unique") == "1")


def letters(run_dir: Path) -> tuple[str, str] | None:
    """The keys' digest and each cell's outcome as its ``LETTER``, in the record's order (what
    history reads of a run whose keys it knows)."""
    found = _query(run_dir, "")
    return (found[1].get("keys_digest", ""), found[1].get("letters", "")) if found else None


def logical_keys(run_dir: Path) -> list[Key] | None:
    """Each cell's logical key in order, joined in SQL; None where no table is current."""
    found = _query(run_dir, "select environment, case_id || '::' || variant, hardware_target "
                   "from cells order by place")
    return found[0] if found is not None else None


def _query(run_dir: Path, query: str) -> tuple[list[tuple[Any, ...]], dict[str, str]] | None:
    """What ``query`` gives of the run's table and the table's meta, if the table was made
    from the record as it is now; else None."""
    path = run_dir / CELLS
    now = stamp(run_dir)
    if now is None or not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            meta = dict(db.execute("select name, value from meta"))
            if (meta.get("format") != FORMAT or meta.get("record_size") != str(now[0])
                    or meta.get("record_mtime_ns") != str(now[1])):
                return None
            data = db.execute(query).fetchall() if query else []
    except sqlite3.Error:  # not a table (half a copy, another file)
        return None
    return data, meta


def changed(old_dir: Path, new_dir: Path) -> list[tuple[CellResult, CellResult]] | None:
    """The cells whose outcome or versions differ between two runs' current tables, as (old,
    new) results, compared place by place: None unless both hold the same keys in order, once."""
    old, new = current(old_dir, ()), current(new_dir, ())
    if (old is None or new is None or not old.keys_digest or old.keys_digest != new.keys_digest
            or not (old.keys_unique and new.keys_unique)):
        return None
    columns = ", ".join(f"{side}.{name}" for side in ("o", "n") for name in NAMES)
    try:
        with contextlib.closing(sqlite3.connect(f"file:{new_dir / CELLS}?mode=ro",
                                                uri=True)) as db:
            db.execute("attach database ? as old", (f"file:{old_dir / CELLS}?mode=ro",))
            if db.execute("select (select count(*) from cells) = (select count(*) from "
                          "old.cells)").fetchone() != (1,):
                return None
            data = db.execute(
                f"select {columns} from cells n join old.cells o on o.place = n.place where "
                "o.outcome != n.outcome or o.versions != n.versions "
                "or o.freeze_sha256 is not n.freeze_sha256 order by n.place").fetchall()
    except sqlite3.Error:
        return None
    width = len(NAMES)
    was = Cells(NAMES, [row[:width] for row in data]).rows()
    now = Cells(NAMES, [row[width:] for row in data]).rows()
    return list(zip(was, now, strict=True))


def read(run_dir: Path, columns: Sequence[str] = NAMES, *, quiet: bool = False) -> Cells:
    """The run's table (``columns``: those alone), converted from the record (and written)
    where not current. ``quiet``: damaged lines left out without a word (the caller says)."""
    unknown = set(columns) - set(NAMES)
    if unknown:
        raise ValueError(f"no column {', '.join(sorted(unknown))} in {CELLS}")
    found = current(run_dir, columns)
    if found is not None:
        return found
    made_from = stamp(run_dir)
    store = RunStore(run_dir).as_of(None, quiet=quiet)
    results = store.results() if made_from is not None else []
    # A damaged line: no table kept, each reader reads the record and says so.
    if not store.damaged and write(run_dir, results, made_from):
        found = current(run_dir, columns)
        if found is not None:
            return found
    at = [NAMES.index(name) for name in columns]
    return Cells(tuple(columns), [tuple(row[i] for i in at) for row in _records(results)],
                 _digest(results))

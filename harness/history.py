"""Each cell's outcomes over the last runs in a folder of run folders (CI keeps one between
nights): which cells changed, which flip back and forth, and pruning the folder to the newest.

Cells are matched by their logical key (environment, ``case::variant``, hardware), so a pin
change does not start a new row. Only the fields a row needs are read from each record.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.results import Outcome
from harness.store import META, RESULTS

Key = tuple[str, str, str]
LETTER = {Outcome.PASS: "P", Outcome.REPRODUCED: "R", Outcome.FAIL: "F", Outcome.SKIP: "S",
          Outcome.ERROR: "E", Outcome.TIMEOUT: "T", Outcome.CRASH: "C", Outcome.NOT_RUN: ".",
          Outcome.MISSING: "?", Outcome.FLAKY: "~"}
ABSENT = "-"


@dataclass(frozen=True, kw_only=True)
class History:
    folder: Path
    runs: tuple[str, ...]  # oldest first
    cells: dict[Key, tuple[Outcome | None, ...]]  # one entry per run; None: not in that run

    @staticmethod
    def flips(outcomes: tuple[Outcome | None, ...]) -> int:
        """How often the outcome changed between runs that ran the cell."""
        seen = [o for o in outcomes if o is not None and o is not Outcome.NOT_RUN]
        return sum(a != b for a, b in pairwise(seen))

    @classmethod
    def flaky(cls, outcomes: tuple[Outcome | None, ...]) -> bool:
        """FLAKY in some run, or fine and failing by turns: failed, passed, failed again."""
        seen = [o.ok for o in outcomes if o is not None and o is not Outcome.NOT_RUN]
        turns = sum(a != b for a, b in pairwise(seen))
        return Outcome.FLAKY in outcomes or turns >= 2

    def rows(self, *, changed_only: bool) -> Iterator[tuple[Key, tuple[Outcome | None, ...]]]:
        for key in sorted(self.cells):
            outcomes = self.cells[key]
            if not changed_only or self.flips(outcomes) or Outcome.FLAKY in outcomes:
                yield key, outcomes

    def render(self, *, changed_only: bool) -> str:
        legend = " ".join(f"{LETTER[o]}={o}" for o in Outcome) + f" {ABSENT}=absent"
        lines = [f"{len(self.runs)} runs in {self.folder}, oldest first: {' '.join(self.runs)}",
                 legend]
        rows = list(self.rows(changed_only=changed_only))
        width = [max((len(k[i]) for k, _ in rows), default=0) for i in range(3)]
        for key, outcomes in rows:
            strip = " ".join(LETTER[o] if o is not None else ABSENT for o in outcomes)
            flips = self.flips(outcomes)
            notes = [f"{flips} change{'s' if flips > 1 else ''}"] if flips else []
            notes += ["flaky"] if self.flaky(outcomes) else []
            lines.append("  ".join(k.ljust(w) for k, w in zip(key, width, strict=True))
                         + f"  {strip}  " + ", ".join(notes))
        what = "changed or flaky" if changed_only else "shown"
        lines.append(f"{len(rows)} of {len(self.cells)} cells {what}"
                     + (" (--all shows every cell)" if changed_only else ""))
        return "\n".join(line.rstrip() for line in lines)

    def to_dict(self, *, changed_only: bool) -> dict[str, Any]:
        return {"folder": str(self.folder), "runs": list(self.runs), "cells": [
            {"environment": k[0], "case": k[1], "hardware": k[2],
             "outcomes": [str(o) if o is not None else None for o in outcomes],
             "changes": self.flips(outcomes), "flaky": self.flaky(outcomes)}
            for k, outcomes in self.rows(changed_only=changed_only)]}


def read_meta(run_dir: Path) -> dict[str, Any] | None:
    """A run folder's run.json, or None where there is no readable one."""
    try:
        meta = json.loads((run_dir / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def created(run_dir: Path) -> float:
    """When a run was created, from its record (-1: not a readable run folder)."""
    meta = read_meta(run_dir)
    try:
        return float(meta.get("created") or 0.0) if meta is not None else -1.0
    except (TypeError, ValueError):
        return -1.0


def run_folders(folder: Path) -> list[Path]:
    """The run folders under ``folder``, oldest first (by when each run was created)."""
    if not folder.is_dir():
        raise UsageError(f"no folder of runs at {folder}")
    found = [(when, p.name, p) for p in folder.iterdir() if (when := created(p)) >= 0]
    return [p for _, _, p in sorted(found)]


INDEX = "outcomes.tsv"  # derived: each cell's logical key and outcome letter, one per line
_FROM_LETTER = {letter: outcome for outcome, letter in LETTER.items()}


def run_outcomes(run_dir: Path) -> dict[Key, Outcome]:
    """Each cell's last attempt in one record, by logical key."""
    return {_key(k): _FROM_LETTER[o] for k, o in _letters(run_dir).items()}


def _key(text: str) -> Key:
    environment, case, hardware = text.split("\t")
    return environment, case, hardware


def _letters(run_dir: Path) -> dict[str, str]:
    """``environment<TAB>case::variant<TAB>hardware`` -> outcome letter, from the run's index
    when it is current (a fleet's record is 100,000 lines of JSON, and 30 of them are the
    history), else from the record, writing the index for next time. Strings, not tuples of
    enums: 30 × 100,000 of those were most of the time and memory of ``harness history``."""
    path = run_dir / RESULTS
    if not path.is_file():
        return {}
    size = path.stat().st_size
    index = run_dir / INDEX
    try:
        with index.open(encoding="utf-8") as fh:
            if fh.readline() == f"# {RESULTS} {size}\n":
                found = {}
                for line in fh:
                    text, _, letter = line.rstrip("\n").rpartition("\t")
                    found[text] = letter
                if all(letter in _FROM_LETTER for letter in set(found.values())):
                    return found
    except (OSError, ValueError):
        pass  # no index, an old one, or a damaged one: read the record
    outcomes: dict[Key, Outcome] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                d = json.loads(line)
                outcomes[(d["environment"], f"{d['case_id']}::{d['variant']}",
                          d["hardware_target"])] = Outcome(d["outcome"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash
    write_index(run_dir, outcomes, size)
    return {"\t".join(p.replace("\t", " ") for p in k): LETTER[o] for k, o in outcomes.items()}


def write_index(run_dir: Path, found: Mapping[Key, Outcome], size: int | None = None) -> None:
    """The index of a record whose results file has ``size`` bytes (an index of another size
    is stale). Keys with a tab or newline in them are not indexed: the record is read."""
    if any("\t" in part or "\n" in part for key in found for part in key):
        return
    size = (run_dir / RESULTS).stat().st_size if size is None else size
    tmp = run_dir / f"{INDEX}.tmp{os.getpid()}"
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(f"# {RESULTS} {size}\n")
            fh.writelines(f"{e}\t{c}\t{h}\t{LETTER[o]}\n" for (e, c, h), o in found.items())
        tmp.replace(run_dir / INDEX)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only copy of a run: read the record each time


def load(folder: Path, *, last: int = 10, keyword: str | None = None) -> History:
    runs = run_folders(folder)[-last:]
    per_run = [_letters(r) for r in runs]
    keys: set[str] = set().union(*per_run) if per_run else set()
    if keyword is not None:
        keys = {k for k in keys if keyword in k.rsplit("\t", 1)[0]}
    shared: dict[tuple[str | None, ...], tuple[Outcome | None, ...]] = {}
    cells = {}
    for k in keys:  # most cells share their strip ("P P P ..."): one tuple of outcomes each
        letters = tuple(run.get(k) for run in per_run)
        strip = shared.get(letters)
        if strip is None:
            strip = shared[letters] = tuple(_FROM_LETTER[x] if x else None for x in letters)
        cells[_key(k)] = strip
    return History(folder=folder, runs=tuple(r.name for r in runs), cells=cells)


def prune(folder: Path, *, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` run folders; returns what was removed."""
    old = run_folders(folder)[:-keep]
    for path in old:
        shutil.rmtree(path)
    return old

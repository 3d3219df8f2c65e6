"""Each cell's outcomes over the last runs in a folder of run folders (CI keeps one between
nights): which cells changed, which flip back and forth, and pruning the folder to the newest.

Cells are matched by their logical key (environment, ``case::variant``, hardware), so a pin
change does not start a new row. Only the fields a row needs are read from each record.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.core import atomic
from harness.core.results import Outcome
from harness.records.codec import read_lines
from harness.records.layout import RESULTS
from harness.records.runs import run_folders

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
    _seen: dict[int, tuple[tuple[Outcome | None, ...], int, bool]] = field(
        default_factory=dict, compare=False, repr=False)

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
            if not changed_only or self.changes(outcomes)[0] or Outcome.FLAKY in outcomes:
                yield key, outcomes

    def changes(self, outcomes: tuple[Outcome | None, ...]) -> tuple[int, bool]:
        """``flips`` and ``flaky`` of a strip, worked out once per distinct strip: ``load``
        shares one tuple among the cells with the same outcomes (most of a fleet's)."""
        found = self._seen.get(id(outcomes))
        if found is None or found[0] is not outcomes:
            found = self._seen[id(outcomes)] = (outcomes, self.flips(outcomes),
                                                self.flaky(outcomes))
        return found[1], found[2]

    def render(self, *, changed_only: bool) -> str:
        legend = " ".join(f"{LETTER[o]}={o}" for o in Outcome) + f" {ABSENT}=absent"
        lines = [f"{len(self.runs)} runs in {self.folder}, oldest first: {' '.join(self.runs)}",
                 legend]
        rows = list(self.rows(changed_only=changed_only))
        width = [max((len(k[i]) for k, _ in rows), default=0) for i in range(3)]
        for key, outcomes in rows:
            strip = " ".join(LETTER[o] if o is not None else ABSENT for o in outcomes)
            flips, flaky = self.changes(outcomes)
            notes = [f"{flips} change{'s' if flips > 1 else ''}"] if flips else []
            notes += ["flaky"] if flaky else []
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
             "changes": self.changes(outcomes)[0], "flaky": self.changes(outcomes)[1]}
            for k, outcomes in self.rows(changed_only=changed_only)]}


INDEX = "outcomes.tsv"  # derived: "# results.jsonl <size>", the letters, then the keys
_FROM_LETTER = {letter: outcome for outcome, letter in LETTER.items()}


@dataclass(frozen=True)
class _Index:
    """One run's outcomes as columns: ``keys`` (``environment<TAB>case::variant<TAB>hardware``
    lines, as bytes) and ``letters`` (one outcome letter per key, in the same order). Runs of
    one matrix have the same keys: their bytes compare equal, and their letters line up."""

    keys: bytes
    letters: str

    def names(self) -> list[str]:
        return self.keys.decode("utf-8").split("\n") if self.keys else []


def run_outcomes(run_dir: Path) -> dict[Key, Outcome]:
    """Each cell's last attempt in one record, by logical key."""
    index = _read(run_dir)
    return {_key(k): _FROM_LETTER[o]
            for k, o in zip(index.names(), index.letters, strict=True)}


def _key(text: str) -> Key:
    environment, case, hardware = text.split("\t")
    return environment, case, hardware


def _read(run_dir: Path) -> _Index:
    """The run's index when it is current (a fleet's record is 100,000 lines of JSON, and 30
    of them are the history), else from the record, writing the index for next time."""
    path = run_dir / RESULTS
    if not path.is_file():
        return _Index(b"", "")
    size = path.stat().st_size
    try:
        head, letters, keys = (run_dir / INDEX).read_bytes().split(b"\n", 2)
        text = letters.decode("ascii")
        if (head == f"# {RESULTS} {size}".encode() and keys.endswith(b"\n")
                and keys.count(b"\n") == len(text) and set(text) <= _FROM_LETTER.keys()):
            return _Index(keys[:-1], text)
    except (OSError, ValueError):
        pass  # no index, an old one, or a damaged one: read the record
    outcomes: dict[Key, Outcome] = {}
    for d in read_lines(path):
        try:
            outcomes[(d["environment"], f"{d['case_id']}::{d['variant']}",
                      d["hardware_target"])] = Outcome(d["outcome"])
        except (ValueError, KeyError, TypeError):
            continue  # not a result line
    write_index(run_dir, outcomes, size)
    names = ["\t".join(p.replace("\t", " ").replace("\n", " ") for p in k) for k in outcomes]
    return _Index("\n".join(names).encode(), "".join(LETTER[o] for o in outcomes.values()))


def write_index(run_dir: Path, found: Mapping[Key, Outcome], size: int | None = None) -> None:
    """The index of a record whose results file has ``size`` bytes (an index of another size
    is stale). Keys with a tab or newline in them are not indexed: the record is read."""
    if any("\t" in part or "\n" in part for key in found for part in key):
        return
    size = (run_dir / RESULTS).stat().st_size if size is None else size
    try:
        with atomic.replacing(run_dir / INDEX, text=True) as fh:
            fh.write(f"# {RESULTS} {size}\n")
            fh.write("".join(LETTER[o] for o in found.values()) + "\n")
            fh.writelines(f"{e}\t{c}\t{h}\n" for e, c, h in found)
    except OSError:
        pass  # a read-only copy of a run: read the record each time


def load(folder: Path, *, last: int = 10, keyword: str | None = None) -> History:
    runs = run_folders(folder)[-last:]
    keys: list[str] = []  # every cell of any of the runs, in order of first appearance
    where: dict[str, int] = {}
    placed: dict[bytes, list[int]] = {}  # a run's keys -> their places in ``keys``
    columns = []
    for run in runs:
        index = _read(run)
        places = placed.get(index.keys)
        if places is None:  # the first run of these keys (most nights: the first run only)
            places = placed[index.keys] = []
            for name in index.names():
                if name not in where:
                    where[name] = len(keys)
                    keys.append(name)
                places.append(where[name])
        columns.append((places, index.letters))
    letters = []  # per run, a letter for every key
    for places, text in columns:
        if places == list(range(len(places))):  # the keys in the same order: as they are
            letters.append(text + ABSENT * (len(keys) - len(places)))
        else:
            column = [ABSENT] * len(keys)
            for i, letter in zip(places, text, strict=True):
                column[i] = letter
            letters.append("".join(column))
    shared: dict[tuple[str, ...], tuple[Outcome | None, ...]] = {}
    cells = {}
    for name, strip_letters in zip(keys, zip(*letters, strict=True), strict=True):
        if keyword is not None and keyword not in name.rsplit("\t", 1)[0]:
            continue
        strip = shared.get(strip_letters)  # most cells share theirs ("P P P ..."): one each
        if strip is None:
            strip = shared[strip_letters] = tuple(_FROM_LETTER.get(x) for x in strip_letters)
        cells[_key(name)] = strip
    return History(folder=folder, runs=tuple(r.name for r in runs), cells=cells)


def prune(folder: Path, *, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` run folders; returns what was removed."""
    old = run_folders(folder)[:-keep]
    for path in old:
        shutil.rmtree(path)
    return old

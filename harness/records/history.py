"""Each cell's outcomes over the last runs of a folder, read from their tables: which cells
changed or flip; pruning. One line of runs (``store.lineage``: by default the newest nightly's
matrix and kind) is shown, the others counted.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.core.errors import StoreError
from harness.core.results import Outcome
from harness.core.words import plural
from harness.records import table
from harness.records.store import list_runs, read_run
from harness.records.table import LETTER, Key

ABSENT = "-"
_FROM_LETTER: dict[str, Outcome | None] = {x: o for o, x in LETTER.items()} | {ABSENT: None}
_BY_NAME = {str(o): LETTER[o] for o in Outcome}  # an outcome's name -> its letter
_OK = tuple(o for o in Outcome if o.ok)  # ``Outcome.ok``, asked of a strip's outcomes in C


@dataclass(frozen=True, kw_only=True)
class History:
    folder: Path
    runs: tuple[str, ...]  # oldest first
    line: tuple[str, str] = ("", "nightly")  # the matrix and kind of the runs shown
    left_out: int = 0  # runs of the folder of another matrix or kind
    cells: dict[Key, tuple[Outcome | None, ...]]  # one entry per run; None: not in that run
    _seen: dict[int, tuple[tuple[Outcome | None, ...], int, bool]] = field(
        default_factory=dict, compare=False, repr=False)

    @staticmethod
    def flips(outcomes: tuple[Outcome | None, ...]) -> int:
        """How often the outcome changed between runs that ran the cell."""
        seen = [o for o in outcomes if o is not None and o is not Outcome.NOT_RUN]
        return sum(a != b for a, b in pairwise(seen))

    @staticmethod
    def flaky(outcomes: tuple[Outcome | None, ...]) -> bool:
        """FLAKY in some run, or fine and failing by turns: failed, passed, failed again."""
        ran = [o in _OK for o in outcomes if o is not None and o is not Outcome.NOT_RUN]
        return Outcome.FLAKY in outcomes or sum(a != b for a, b in pairwise(ran)) >= 2

    def rows(self, *, changed_only: bool) -> Iterator[tuple[Key, tuple[Outcome | None, ...]]]:
        for key in sorted(self.cells):
            outcomes = self.cells[key]
            if not changed_only or self.changes(outcomes)[0] or Outcome.FLAKY in outcomes:
                yield key, outcomes

    def changes(self, outcomes: tuple[Outcome | None, ...]) -> tuple[int, bool]:
        """``flips`` and ``flaky`` of a strip, once per distinct strip (``load`` shares them)."""
        found = self._seen.get(id(outcomes))
        if found is None or found[0] is not outcomes:
            found = self._seen[id(outcomes)] = (outcomes, self.flips(outcomes),
                                                self.flaky(outcomes))
        return found[1], found[2]

    def render(self, *, changed_only: bool) -> str:
        legend = " ".join(f"{LETTER[o]}={o}" for o in Outcome) + f" {ABSENT}=absent"
        head = (f"{plural(len(self.runs), 'run')} in {self.folder}, oldest first: "
                f"{' '.join(self.runs)}")
        if self.left_out:
            matrix, kind = self.line
            head += (f" ({kind} runs{' of ' + matrix if matrix else ''} only; {self.left_out} "
                     "of other matrices or kinds (trial, bump) left out)")
        lines = [head, legend]
        rows = list(self.rows(changed_only=changed_only))
        width = [max((len(k[i]) for k, _ in rows), default=0) for i in range(3)]
        texts: dict[int, str] = {}  # a strip (by id: ``rows`` holds each) -> its letters
        for key, outcomes in rows:
            strip = texts.get(id(outcomes))
            if strip is None:
                strip = texts[id(outcomes)] = " ".join(LETTER[o] if o is not None else ABSENT
                                                       for o in outcomes)
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
        return {"folder": str(self.folder), "runs": list(self.runs), "matrix": self.line[0],
                "kind": self.line[1], "left_out": self.left_out, "cells": [
            {"environment": k[0], "case": k[1], "hardware": k[2],
             "outcomes": [str(o) if o is not None else None for o in outcomes],
             "changes": self.changes(outcomes)[0], "flaky": self.changes(outcomes)[1]}
            for k, outcomes in self.rows(changed_only=changed_only)]}


def load(folder: Path, *, last: int = 10, keyword: str | None = None,
         line: tuple[str, str] | None = None, before: Path | None = None,
         quiet: bool = False) -> History:
    """The last ``last`` runs of ``folder`` of one ``line`` (matrix and kind), made ``before``
    a run, one query of each's table (keys read once per digest); ``quiet``: as ``table.read``."""
    every = list_runs(folder, required=True)
    if before is not None:  # a report's page: what came before its run, whatever came after
        mine = read_run(before)
        every = [run for run in every if mine is not None and run.order < mine.order]
    lines = [run.line for run in every]
    # The line followed: the one asked for, else the newest nightly's (else the newest run's).
    line = line or next((x for x in reversed(lines) if x[1] == "nightly"),
                        lines[-1] if lines else ("", "nightly"))
    runs = [run.path for run, found in zip(every, lines, strict=True) if found == line][-last:]
    left_out = sum(found != line for found in lines)
    keys: dict[Key, int] = {}  # every cell of the runs, in order of first appearance: place
    # a run's keys (their digest) -> their places in ``keys``, and whether those are 0, 1, ...
    placed: dict[str, tuple[list[int], bool]] = {}
    columns: list[tuple[list[int], bool, str]] = []
    unread: list[Path] = []  # runs whose record cannot be read at all: left out, said
    for run in runs:
        found = table.letters(run)
        known = placed.get(found[0]) if found is not None else None
        if found is None or known is None or len(known[0]) != len(found[1]):
            run_keys = table.logical_keys(run) if found is not None else None
            if found is None or run_keys is None or len(run_keys) != len(found[1]):
                # No current table: made from the record (once), its damaged lines named.
                try:
                    whole = table.read(run, table.OUTCOMES, quiet=quiet)
                except StoreError as exc:
                    print(f"harness: warning: {exc}; the run is left out", file=sys.stderr)
                    unread.append(run)
                    continue
                run_keys = whole.logical_keys()
                found = whole.keys_digest, "".join(map(_BY_NAME.__getitem__,
                                                       whole.column("outcome")))
            places = [keys.setdefault(k, len(keys)) for k in run_keys]
            known = placed[found[0]] = places, places == list(range(len(places)))
        columns.append((*known, found[1]))
    full = []  # per run, a letter per key (ABSENT: not in that run)
    for places, in_order, text in columns:
        if in_order:
            full.append(text + ABSENT * (len(keys) - len(places)))
        else:
            column = [ABSENT] * len(keys)
            for place, letter in zip(places, text, strict=True):
                column[place] = letter
            full.append("".join(column))
    shared: dict[tuple[str, ...], tuple[Outcome | None, ...]] = {}
    cells = {}
    for key, letters in zip(keys, zip(*full, strict=True) if full else ((),) * len(keys),
                            strict=True):
        if keyword is not None and keyword not in f"{key[0]}\t{key[1]}":
            continue
        strip = shared.get(letters)  # most cells share theirs: one each
        if strip is None:
            strip = shared[letters] = tuple(map(_FROM_LETTER.__getitem__, letters))
        cells[key] = strip
    return History(folder=folder, runs=tuple(r.name for r in runs if r not in unread),
                   cells=cells, line=line, left_out=left_out)


def prune(folder: Path, *, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` run folders; returns what was removed."""
    old = [run.path for run in list_runs(folder, required=True)][:-keep]
    for path in old:
        shutil.rmtree(path)
    return old

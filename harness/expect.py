"""What a run is expected to show, how far it strayed, and the exit code CI asks for.

Two sources say what is expected of a cell, found by its logical key (environment,
``case::variant``, hardware), never by its content id:

- rules in matrix.yaml (``expect:``), written by people: "this environment cannot be built
  where GitHub is out of reach", "mergekit reproduces on torch 2.0.1". A rule with a
  ``reason`` pattern holds only for results whose reason matches it (an ERROR for that reason
  is known; an ERROR for another is news);
- a baseline: every cell's outcome in an earlier run (``harness baseline RUN -o FILE``, or a
  run folder given as is).

A rule wins over the baseline, and a cell neither speaks for is expected to be fine (PASS,
REPRODUCED, SKIP, FLAKY). ``--fail-on`` turns the verdicts into the exit code: ``new`` (a
cell fails that was not expected to), ``changed`` (any cell differs from what was expected,
a documented failure that stopped reproducing included) or ``any`` (any cell is not fine,
whatever was expected).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import UsageError
from harness.results import CellResult, Outcome

if TYPE_CHECKING:
    from harness.store import RunStore

FAIL_ON = ("new", "changed", "any")
BASELINE_FORMAT = "ml-compat-harness baseline 1"
#: What a cell was that says nothing of what it should be.
_SILENT = (Outcome.NOT_RUN, Outcome.MISSING)

Key = tuple[str, str, str]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One ``expect:`` entry. Globs select cells; ``case`` without ``::`` names a case id."""

    outcomes: frozenset[Outcome]
    why: str
    environment: str = "*"
    case: str = "*"
    hardware: str = "*"
    reason: str | None = None  # a regular expression searched in the result's reason
    where: str = ""  # "matrix.yaml:12", for messages

    def selects(self, key: Key) -> bool:
        environment, label, hardware = key
        case = label if "::" in self.case else label.split("::", 1)[0]
        return (fnmatchcase(environment, self.environment) and fnmatchcase(case, self.case)
                and fnmatchcase(hardware, self.hardware))

    def holds_for(self, result: CellResult) -> bool:
        return self.selects(result.logical_key) and (
            self.reason is None or re.search(self.reason, result.reason) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"environment": self.environment, "case": self.case, "hardware": self.hardware,
                "outcome": sorted(str(o) for o in self.outcomes), "reason": self.reason,
                "why": self.why, "where": self.where}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rule:
        return cls(outcomes=frozenset(Outcome(o) for o in data["outcome"]), why=data["why"],
                   environment=data.get("environment", "*"), case=data.get("case", "*"),
                   hardware=data.get("hardware", "*"), reason=data.get("reason"),
                   where=data.get("where", ""))


@dataclass(frozen=True, kw_only=True)
class Baseline:
    source: str  # the run ids or file it came from
    outcomes: Mapping[Key, Outcome]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    result: CellResult
    expected: frozenset[Outcome]  # empty: any fine outcome
    status: str  # expected | new failure | fixed | changed | not run
    why: str = ""  # the rule's why, or "baseline <source>"

    @property
    def deviates(self) -> bool:
        return self.status in ("new failure", "fixed", "changed")


def judge(results: Iterable[CellResult], rules: Sequence[Rule] = (),
          baseline: Baseline | None = None) -> list[Verdict]:
    verdicts = []
    holding_for = _Holding(rules)
    for result in results:
        expected: frozenset[Outcome] = frozenset()
        why = ""
        holding = holding_for(result)
        if holding:
            expected = frozenset().union(*(r.outcomes for r in holding))
            why = holding[0].why
        elif baseline is not None and baseline.outcomes.get(result.logical_key) not in (
                None, *_SILENT):
            expected = frozenset({baseline.outcomes[result.logical_key]})
            why = f"baseline {baseline.source}"
        verdicts.append(Verdict(result=result, expected=expected, why=why,
                                status=_status(result.outcome, expected)))
    return verdicts


class _Holding:
    """The rules that hold for a result, as ``Rule.holds_for`` says, with each glob matched
    once per distinct value: a fleet's 100,000 cells have a few thousand environments, a few
    dozen case variants and a few targets, and fnmatch per rule per cell was most of judging."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self.reasons = [re.compile(r.reason) if r.reason is not None else None for r in rules]
        self.environments: dict[str, frozenset[int]] = {}
        self.labels: dict[str, frozenset[int]] = {}
        self.hardware: dict[str, frozenset[int]] = {}

    def __call__(self, result: CellResult) -> list[Rule]:
        if not self.rules:
            return []
        environment, label, hardware = result.logical_key
        found = self._cached(self.environments, environment, "environment")
        if found:
            found &= self._cached(self.labels, label, "case")
        if found:
            found &= self._cached(self.hardware, hardware, "hardware")
        return [self.rules[i] for i in sorted(found) if (pattern := self.reasons[i]) is None
                or pattern.search(result.reason) is not None]

    def _cached(self, cache: dict[str, frozenset[int]], value: str, name: str
                ) -> frozenset[int]:
        found = cache.get(value)
        if found is None:
            found = cache[value] = frozenset(
                i for i, r in enumerate(self.rules) if fnmatchcase(
                    # a case glob without "::" names case ids, not variants
                    value.split("::", 1)[0] if name == "case" and "::" not in r.case
                    else value, getattr(r, name)))
        return found


def _status(outcome: Outcome, expected: frozenset[Outcome]) -> str:
    if outcome is Outcome.NOT_RUN:
        return "not run"
    if outcome in expected or (not expected and outcome.ok):
        return "expected"
    if not outcome.ok:
        return "new failure"
    return "fixed" if all(not o.ok for o in expected) else "changed"


def exit_code(verdicts: Sequence[Verdict], fail_on: str) -> int:
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {fail_on!r}: expected one of {', '.join(FAIL_ON)}")
    if fail_on == "any":
        return 1 if any(not v.result.outcome.ok for v in verdicts) else 0
    if fail_on == "new":
        return 1 if any(v.status == "new failure" for v in verdicts) else 0
    return 1 if any(v.deviates for v in verdicts) else 0


def summary_lines(verdicts: Sequence[Verdict], *, limit: int = 20) -> list[str]:
    """A count per status, the known failures once per reason, then each deviation."""
    counts = Counter(v.status for v in verdicts)
    known = [v for v in verdicts if v.status == "expected" and not v.result.outcome.ok]
    parts = [f"{counts[s]} {s}" for s in ("new failure", "fixed", "changed") if counts[s]]
    if known:
        parts.append(f"{len(known)} known failures")
    lines = ["against expectations: " + (", ".join(parts) or "as expected")]
    for why, n in Counter(v.why for v in known).most_common():
        lines.append(f"  known: {n} cells: {why}")
    for v in [v for v in verdicts if v.deviates][:limit]:
        r = v.result
        wanted = "/".join(sorted(str(o) for o in v.expected)) or "fine"
        lines.append(f"  {v.status}: {r.environment} {r.case_id}::{r.variant} "
                     f"@{r.hardware_target}: {r.outcome} (expected {wanted})")
    extra = sum(v.deviates for v in verdicts) - limit
    if extra > 0:
        lines.append(f"  ... and {extra} more (compat.json lists them all)")
    return lines


def baseline_from(results: Iterable[CellResult], source: str) -> dict[str, Any]:
    """A baseline file's content: each cell that ran, by logical key, in a stable order."""
    cells = sorted(({"environment": r.environment, "case": f"{r.case_id}::{r.variant}",
                     "hardware": r.hardware_target, "outcome": str(r.outcome)}
                    for r in results if r.outcome not in _SILENT),
                   key=lambda c: (c["environment"], c["case"], c["hardware"]))
    return {"format": BASELINE_FORMAT, "source": source, "cells": cells}


def resolve_baseline(text: str, reports_dir: Path) -> Path:
    """The file or run folder ``--baseline`` names, fixed before a run adds a newer one (so
    ``latest`` stays the run before this one)."""
    path = Path(text)
    if path.is_file():
        return path
    from harness.errors import StoreError
    from harness.store import RunStore

    try:
        return RunStore.open(reports_dir, text).run_dir
    except StoreError:
        raise UsageError(f"--baseline {text}: neither a baseline file nor a run (an id under "
                         f"{reports_dir / 'runs'}, a run folder, latest)") from None


def load_baseline(path: Path, reports_dir: Path) -> Baseline:
    """A baseline file, or a run (id, folder, ``latest``) whose outcomes are the baseline."""
    if path.is_file():
        return _baseline_file(path)
    from harness.merge import choose_records
    from harness.store import RunStore

    store = RunStore(resolve_baseline(str(path), reports_dir))
    chosen = choose_records([store])[0]
    return Baseline(source=store.run_id,
                    outcomes={r.logical_key: r.outcome for _, r in chosen.values()})


def _baseline_file(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: unreadable: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
        raise UsageError(f"--baseline {path}: not a baseline file (write one with "
                         "`harness baseline RUN -o FILE`)")
    try:
        outcomes = {(c["environment"], c["case"], c["hardware"]): Outcome(c["outcome"])
                    for c in data["cells"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: a malformed cell: {exc}") from None
    return Baseline(source=str(data.get("source") or path.name), outcomes=outcomes)


def recorded_rules(metas: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules run records keep (run.json ``expect``, so merge and report need no matrix),
    once each: the shards of one run all carry their matrix's."""
    seen: dict[str, dict[str, Any]] = {}
    for meta in metas:
        for rule in meta.get("expect") or ():
            seen.setdefault(json.dumps(rule, sort_keys=True), rule)
    return list(seen.values())


def judge_runs(stores: Sequence[RunStore], baseline: Baseline | None = None,
               results: Sequence[CellResult] | None = None) -> list[Verdict]:
    """Every cell of the records once (as ``harness merge`` chooses it, unless the caller has
    them: ``results``), judged by the rules the records keep and the baseline."""
    from harness.merge import choose_records

    rules = tuple(Rule.from_dict(d) for d in recorded_rules(s.meta for s in stores))
    if results is None:
        results = [r for _, r in choose_records(stores)[0].values()]
    return judge(results, rules, baseline)

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
from typing import Any

from harness.core.defaults import FAIL_ON
from harness.core.errors import UsageError
from harness.core.results import CellResult, Outcome, counted
from harness.core.rules import Rule
from harness.records.baseline import Baseline
from harness.records.select import choose_records
from harness.records.store import RunStore

BASELINE_FORMAT = "ml-compat-harness baseline 1"
#: What a cell was that says nothing of what it should be.
_SILENT = (Outcome.NOT_RUN, Outcome.MISSING)

Key = tuple[str, str, str]


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
    # A suite's session that came back as its tests is judged as those tests, not once more.
    for result in counted(list(results)):
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
    # A suite's tests: first how many deviate per environment, a line each.
    per_suite = Counter((v.result.case_id, v.result.environment, v.result.hardware_target,
                         v.status) for v in verdicts if v.deviates and v.result.parent)
    for (suite, env, hw, status), n in sorted(per_suite.items()):
        lines.append(f"  suite {suite} in {env} @{hw}: {n} {status}")
    for v in [v for v in verdicts if v.deviates][:limit]:
        r = v.result
        wanted = "/".join(sorted(str(o) for o in v.expected)) or "fine"
        lines.append(f"  {v.status}: {r.environment} {r.case_id}::{r.variant} "
                     f"@{r.hardware_target}: {r.outcome} (expected {wanted})")
    extra = sum(v.deviates for v in verdicts) - limit
    if extra > 0:
        lines.append(f"  ... and {extra} more (compat.json lists them all)")
    return lines


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
    rules = tuple(Rule.from_dict(d) for d in recorded_rules(s.meta for s in stores))
    if results is None:
        results = [r for _, r in choose_records(stores)[0].values()]
    return judge(results, rules, baseline)

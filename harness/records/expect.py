"""What a run is expected to show (matrix.yaml's ``expect:`` rules, then a baseline: an earlier
run's outcomes; else fine), how far it strayed, and the exit code ``--fail-on`` asks for.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from harness.core.defaults import FAIL_ON
from harness.core.errors import StoreError, UsageError
from harness.core.results import CellResult, Outcome, counted
from harness.core.rules import Rule
from harness.core.words import plural
from harness.records import table
from harness.records.compare import choose_records
from harness.records.store import META, RunStore, latest_run, lineage
from harness.records.table import Key

J = TypeVar("J", bound=CellResult)

BASELINE_FORMAT = "ml-compat-harness baseline 1"
#: What a cell was that says nothing of what it should be.
SILENT = (Outcome.NOT_RUN, Outcome.MISSING)


@dataclass(frozen=True, kw_only=True)
class Baseline:
    source: str  # the run ids or file it came from
    outcomes: Mapping[Key, Outcome]


def baseline_from(results: Iterable[CellResult], source: str) -> dict[str, Any]:
    """A baseline file's content: each cell that ran, by logical key, in a stable order."""
    cells = sorted(({"environment": r.environment, "case": f"{r.case_id}::{r.variant}",
                     "hardware": r.hardware_target, "outcome": str(r.outcome)}
                    for r in results if r.outcome not in SILENT),
                   key=lambda c: (c["environment"], c["case"], c["hardware"]))
    return {"format": BASELINE_FORMAT, "source": source, "cells": cells}


def resolve_baseline(text: str, reports_dir: Path, matrix: str | Path | None = None,
                     judged: Path | None = None) -> Path:
    """The file or run folder ``--baseline`` names, fixed before a run adds a newer one;
    ``matrix``: ``latest`` is then the newest nightly run of that matrix file other than the
    run ``judged`` (a run is no baseline of itself: every failure of it would be known)."""
    path = Path(text)
    if path.is_file():
        return path
    if text == "latest" and matrix:
        found = latest_run(reports_dir, lineage({"matrix": str(matrix)}), other_than=judged)
        if found is None:
            raise UsageError(f"--baseline latest: no nightly run of {matrix} under "
                             f"{reports_dir / 'runs'}")
        return found.resolve()
    try:
        return RunStore.open(reports_dir, text).run_dir
    except StoreError as exc:
        if any((run / META).is_file() for run in (reports_dir / "runs" / text, path)):
            raise UsageError(f"--baseline {text}: {exc}") from None  # a run, damaged
        raise UsageError(f"--baseline {text}: neither a baseline file nor a run (an id under "
                         f"{reports_dir / 'runs'}, a run folder, latest)") from None


def load_baseline(path: Path, reports_dir: Path) -> Baseline:
    """A baseline file, or a run (id, folder, ``latest``) whose outcomes are the baseline."""
    if not path.is_file():
        run_dir = resolve_baseline(str(path), reports_dir)
        return Baseline(source=run_dir.name,
                        outcomes=table.read(run_dir, table.OUTCOMES).outcomes())
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


class Judgement(NamedTuple):
    """What judging makes of a cell (shared by the cells of one outcome and expectation)."""

    outcome: Outcome
    expected: frozenset[Outcome]
    why: str
    status: str


class _Judge:
    """Each result's ``Judgement``, as ``Rule.holds_for`` and the baseline say; each glob
    matched once per distinct value, each reason pattern once per reason."""

    def __init__(self, rules: Sequence[Rule], baseline: Baseline | None) -> None:
        self.rules = tuple(rules)
        self.reasons = [re.compile(r.reason) if r.reason is not None else None for r in rules]
        self.baseline = baseline
        # a value -> the rules whose glob for it matches, as a bit mask
        self.environments: dict[str, int] = {}
        self.labels: dict[tuple[str, str], int] = {}
        self.hardware: dict[str, int] = {}
        self.holding: dict[tuple[int, str], tuple[int, ...]] = {}  # (mask, reason) -> rules
        self.judged: dict[tuple[tuple[int, ...], Outcome, Outcome | None], Judgement] = {}

    def each(self, results: Iterable[J]) -> Iterator[tuple[J, Judgement]]:
        before_of = self.baseline.outcomes if self.baseline is not None else None
        for result in results:
            holding = self._holding(result) if self.rules else ()
            before = None
            if not holding and before_of is not None:
                before = before_of.get(result.logical_key)
                if before in SILENT:
                    before = None
            key = (holding, result.outcome, before)
            judgement = self.judged.get(key)
            if judgement is None:
                judgement = self.judged[key] = self._judgement(*key)
            yield result, judgement

    def _holding(self, result: CellResult) -> tuple[int, ...]:
        """The indices of the rules that hold for ``result``."""
        mask = self._glob(self.environments, result.environment, "environment")
        if mask:
            mask &= self._glob(self.labels, (result.case_id, result.variant), "case")
        if mask:
            mask &= self._glob(self.hardware, result.hardware_target, "hardware")
        if not mask:
            return ()
        key = (mask, result.reason)
        found = self.holding.get(key)
        if found is None:
            found = self.holding[key] = tuple(
                i for i in range(len(self.rules)) if mask >> i & 1 and (
                    (pattern := self.reasons[i]) is None
                    or pattern.search(result.reason) is not None))
        return found

    def _glob(self, seen: dict[Any, int], value: str | tuple[str, str], name: str) -> int:
        """The rules whose ``name`` glob matches ``value``, as a bit mask (once per value)."""
        mask = seen.get(value)
        if mask is None:
            text = value if isinstance(value, str) else "::".join(value)
            mask = 0
            for i, rule in enumerate(self.rules):
                pattern = getattr(rule, name)
                # a case glob without "::" names case ids, not variants
                matched = text.split("::", 1)[0] if name == "case" and "::" not in pattern else text
                if fnmatchcase(matched, pattern):
                    mask |= 1 << i
            seen[value] = mask
        return mask

    def _judgement(self, holding: tuple[int, ...], outcome: Outcome, before: Outcome | None
                   ) -> Judgement:
        expected: frozenset[Outcome] = frozenset()
        why = ""
        if holding:
            expected = frozenset().union(*(self.rules[i].outcomes for i in holding))
            why = self.rules[holding[0]].why
        elif before is not None:
            assert self.baseline is not None
            expected = frozenset({before})
            why = f"baseline {self.baseline.source}"
        return Judgement(outcome=outcome, expected=expected, why=why,
                          status=_status(outcome, expected))


def _status(outcome: Outcome, expected: frozenset[Outcome]) -> str:
    if outcome is Outcome.NOT_RUN:
        return "not run"
    if outcome in expected or (not expected and outcome.ok):
        return "expected"
    if not outcome.ok:
        return "new failure"
    return "fixed" if all(not o.ok for o in expected) else "changed"


_DEVIATING = frozenset({"new failure", "fixed", "changed"})


def _exit_code(judged: Iterable[tuple[Outcome, str]], fail_on: str) -> int:
    if fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {fail_on!r}: expected one of {', '.join(FAIL_ON)}")
    if fail_on == "any":
        return 1 if any(not outcome.ok for outcome, _ in judged) else 0
    if fail_on == "new":
        return 1 if any(status == "new failure" for _, status in judged) else 0
    return 1 if any(status in _DEVIATING for _, status in judged) else 0


#: A cell that deviates: its result, what was expected of it, its status.
_Deviation = tuple[CellResult, frozenset[Outcome], str]


def _summary(cells: Counter[Judgement], deviating: Sequence[_Deviation], limit: int
             ) -> list[str]:
    """A count per status, the known failures once per reason, then each deviation."""
    counts: Counter[str] = Counter()
    known: Counter[str] = Counter()  # per why, in the order each first came, as the cells
    for judgement, n in cells.items():
        counts[judgement.status] += n
        if judgement.status == "expected" and not judgement.outcome.ok:
            known[judgement.why] += n
    parts = [how_many(counts[s], s) for s in ("new failure", "fixed", "changed") if counts[s]]
    if known:
        parts.append(how_many(known.total(), "known failure"))
    lines = ["against expectations: " + (", ".join(parts) or "as expected")]
    for why, n in known.most_common():
        lines.append(f"  known: {plural(n, 'cell')}: {why}")
    # A suite's tests: first how many deviate per environment, a line each.
    per_suite = Counter((r.case_id, r.environment, r.hardware_target, status)
                        for r, _, status in deviating if r.parent)
    for (suite, env, hw, status), n in sorted(per_suite.items()):
        lines.append(f"  suite {suite} in {env} @{hw}: {how_many(n, status)}")
    for r, expected, status in deviating[:limit]:
        wanted = "/".join(sorted(str(o) for o in expected)) or "fine"
        lines.append(f"  {status}: {r.environment} {r.case_id}::{r.variant} "
                     f"@{r.hardware_target}: {r.outcome} (expected {wanted})")
    extra = len(deviating) - limit
    if extra > 0:
        lines.append(f"  ... and {extra} more (compat.json lists them all)")
    return lines


def how_many(n: int, status: str) -> str:
    """``3 new failures``, ``1 new failure``, ``2 fixed``: a count and what it counts."""
    return f"{n} {status}{'s' if n != 1 and status.endswith('failure') else ''}"


def recorded_rules(metas: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The rules run records keep (run.json ``expect``), once each."""
    seen: dict[str, dict[str, Any]] = {}
    for meta in metas:
        for rule in meta.get("expect") or ():
            seen.setdefault(json.dumps(rule, sort_keys=True), rule)
    return list(seen.values())


def judged_exit(stores: Sequence[RunStore], reports_dir: Path, fail_on: str,
                baseline: str | None, results: Sequence[CellResult] | None = None) -> int:
    """The exit code ``--fail-on`` asks of the records, after printing ``judged_lines``."""
    known = load_baseline(Path(baseline), reports_dir) if baseline else None
    lines, code = judged_lines(stores, fail_on, known, results)
    if lines:
        print("\n".join(lines))
    return code


def judged_lines(stores: Sequence[RunStore], fail_on: str, known: Baseline | None,
                 results: Sequence[CellResult] | None = None) -> tuple[list[str], int]:
    """What ``judged_exit`` prints (nothing without news or a baseline) and its exit code."""
    rules = tuple(Rule.from_dict(d) for d in recorded_rules(s.meta for s in stores))
    if results is None:
        results = [r for _, r in choose_records(stores)[0].values()]
    lines, code = judged_summary(results, rules, known, fail_on)
    return (lines if len(lines) > 1 or known is not None else []), code


def judged_report(results: Iterable[J], rules: Sequence[Rule] = (),
                  baseline: Baseline | None = None, *, limit: int = 20
                  ) -> tuple[list[str], list[tuple[J, Judgement]]]:
    """The summary's lines, and the cells a report lists one by one (deviating, or failures
    that were expected) with their judgements."""
    lines, notable, _ = _judged(results, rules, baseline, limit)
    return lines, notable


def judged_summary(results: Iterable[CellResult], rules: Sequence[Rule] = (),
                   baseline: Baseline | None = None, fail_on: str = "new", *, limit: int = 20
                   ) -> tuple[list[str], int]:
    """The summary's lines and the exit code ``fail_on`` asks."""
    _exit_code((), fail_on)  # a --fail-on that is none, before the judging
    lines, _, cells = _judged(results, rules, baseline, limit)
    return lines, _exit_code(((j.outcome, j.status) for j in cells), fail_on)


def _judged(results: Iterable[J], rules: Sequence[Rule], baseline: Baseline | None, limit: int
            ) -> tuple[list[str], list[tuple[J, Judgement]], Counter[Judgement]]:
    """The summary's lines, the notable cells (``judged_report``), each judgement's count."""
    cells: Counter[Judgement] = Counter()
    notable: list[tuple[J, Judgement]] = []
    kept: dict[int, bool] = {}  # a judgement (by id) -> whether its cells are notable
    for result, found in _Judge(rules, baseline).each(counted(list(results))):
        cells[found] += 1
        keep = kept.get(id(found))
        if keep is None:
            keep = kept[id(found)] = found.status in _DEVIATING or (
                found.status == "expected" and not found.outcome.ok)
        if keep:
            notable.append((result, found))
    deviating = [(r, j.expected, j.status) for r, j in notable if j.status in _DEVIATING]
    return _summary(cells, deviating, limit), notable, cells

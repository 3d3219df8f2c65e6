"""What the report says of a test suite: totals per environment, and the tests whose outcome
differs, each with the versions that decide it ("fails with numpy 2.4.6")."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations as subsets
from typing import Any

from harness.core.results import CellResult, Outcome
from harness.core.words import plural
from harness.plan.suites import pytest_words
from harness.report.site.versions import (
    by_priority,
    combinations,
    label,
    slug,
    varying,
    version_sort_key,
)

#: How a test's outcome reads in a claim; the order is which kind a claim speaks of first.
WORDS = ("fails", "skipped", "not collected")
SESSION = "(session)"  # the variant of a suite's own result (plan.suites)
MAX_KEYS = 3  # a claim names at most this many packages; past it, the environments
#: A suite's totals: pytest's own words, in the order its summary line uses.
PYTEST_WORDS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def word(outcome: Outcome | None) -> str:
    """A test's outcome as a claim reads it: None is a test the environment did not collect."""
    if outcome is None:
        return "not collected"
    if outcome.failed or outcome is Outcome.MISSING:
        return "fails"
    if outcome is Outcome.SKIP:
        return "skipped"
    return "passes"  # PASS, FLAKY (passed when tried again), REPRODUCED


@dataclass(frozen=True, kw_only=True)
class Column:
    """One environment on one hardware target: where a session ran."""

    environment: str
    hardware: str
    label: str  # the versions that vary between the suite's columns

    @property
    def name(self) -> str:
        return f"{self.label} @{self.hardware}"


@dataclass(frozen=True, kw_only=True)
class Totals:
    column: Column
    outcome: Outcome  # the session's
    counts: tuple[tuple[str, int], ...]  # pytest's words (passed, failed, xfailed...), as it counts
    reason: str  # why the session failed as a whole (no collection, a shadowed package)
    imported: str  # where each package under test was imported from
    log: str


@dataclass(frozen=True, kw_only=True)
class Claim:
    """The columns a test ``word`` in: by their versions of ``packages``, else by name."""

    word: str
    packages: tuple[str, ...] = ()
    combos: tuple[tuple[str, ...], ...] = ()
    columns: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        if not self.packages:
            return f"{self.word} in {', '.join(self.columns)}"
        # The package with the most values first: "torch 2.0.1, 2.2.2 with numpy 2.4.6".
        order = sorted(range(len(self.packages)),
                       key=lambda i: -len({c[i] for c in self.combos}))
        shown = combinations([tuple(c[i] for i in order) for c in self.combos],
                             [self.packages[i] for i in order])
        if len(self.packages) == 1:
            return f"{self.word} with {self.packages[0]} {', '.join(shown)}"
        return f"{self.word} with {'; '.join(shown)}"


@dataclass(frozen=True, kw_only=True)
class Differing:
    test: str
    outcomes: tuple[Outcome | None, ...]  # per column; None: not collected there
    claim: Claim
    log: str
    # The first line of each distinct reason in the columns the claim names.
    lines: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SuiteTable:
    suite: str
    target: str
    varying: tuple[str, ...]
    columns: tuple[Column, ...]
    totals: tuple[Totals, ...]
    not_run: tuple[tuple[str, str], ...]  # (column name, why) sessions that did not run
    same: tuple[tuple[str, int], ...]  # ("passes", 52): tests with one outcome everywhere
    differing: tuple[Differing, ...]

    @property
    def slug(self) -> str:
        return slug(self.suite)

    @property
    def summary(self) -> str:
        """Its totals in a line, as the index and summary.txt say them."""
        n = len(self.differing)
        return "; ".join(f"{row.column.name}: " + pytest_words(Counter(dict(row.counts)))
                         for row in self.totals) + f" — {plural(n, 'test')} differ{'s' * (n == 1)}"


def suite_names(results: Sequence[CellResult], cases: Mapping[str, Mapping[str, Any]]
                ) -> set[str]:
    """The case ids that are test suites: declared so, or seen with a session."""
    return ({str(m.get("case")) for m in cases.values() if m.get("suite")}
            | {r.case_id for r in results if r.parent or r.variant == SESSION})


def suite_table(suite: str, results: Sequence[CellResult],
                versions: Mapping[str, dict[str, str]],
                cases: Mapping[str, Mapping[str, Any]], links: Mapping[str, str]
                ) -> SuiteTable:
    spec = (cases.get(f"{suite}::{SESSION}") or {}).get("suite") or {}
    target = str(spec.get("path") or (f"--pyargs {spec['pyargs']}" if spec.get("pyargs")
                                      else suite))
    sessions = [r for r in results if r.variant == SESSION]
    tests = [r for r in results if r.variant != SESSION]
    ran = [s for s in sessions if s.outcome is not Outcome.NOT_RUN]
    keys = list(dict.fromkeys([*((s.environment, s.hardware_target) for s in ran),
                               *((t.environment, t.hardware_target) for t in tests)]))
    rows = {k: {**versions.get(k[0], {}), "hardware": k[1]} for k in keys}
    vary = (*by_priority(varying(rows.values()) - {"hardware"}),
            *(("hardware",) if len({hw for _, hw in keys}) > 1 else ()))
    columns = {k: Column(environment=k[0], hardware=k[1], label=label(rows[k], vary, k[0]))
               for k in keys}
    order = sorted(keys, key=lambda k: ([version_sort_key(rows[k].get(p, "")) for p in vary], k))
    by_test: dict[str, dict[tuple[str, str], CellResult]] = defaultdict(dict)
    for t in tests:
        by_test[t.variant][(t.environment, t.hardware_target)] = t
    same: Counter[str] = Counter()
    differing = []
    for test in sorted(by_test):
        got = by_test[test]
        outcomes = tuple(got[k].outcome if k in got else None for k in order)
        words = {word(o) for o in outcomes}
        if len(words) == 1:
            same[words.pop()] += 1
            continue
        claim = decide(dict(zip(order, map(word, outcomes), strict=True)), rows, vary, columns)
        named = [got[k] for k in order if k in got and word(got[k].outcome) == claim.word]
        lines = tuple(dict.fromkeys(t.reason.splitlines()[0] for t in named if t.reason.strip()))
        differing.append(Differing(test=test, outcomes=outcomes, claim=claim,
                                   log=links.get(named[0].cell_id, "") if named else "",
                                   lines=lines))
    totals = tuple(_totals(s, columns[(s.environment, s.hardware_target)], links)
                   for s in sorted(ran, key=lambda s: order.index((s.environment,
                                                                   s.hardware_target))))
    not_run = tuple((f"{s.environment} @{s.hardware_target}", s.reason)
                    for s in sessions if s.outcome is Outcome.NOT_RUN)
    return SuiteTable(suite=suite, target=target, varying=vary,
                      columns=tuple(columns[k] for k in order), totals=totals, not_run=not_run,
                      same=tuple(sorted(same.items(), key=lambda kv: WORDS.index(kv[0])
                                        if kv[0] in WORDS else -1)),
                      differing=tuple(differing))


def decide(words: Mapping[tuple[str, str], str], rows: Mapping[tuple[str, str], dict[str, str]],
           varying: Sequence[str], columns: Mapping[tuple[str, str], Column]) -> Claim:
    """The fewest packages whose versions tell where the test does its first ``WORDS``."""
    said = next(w for w in WORDS if w in words.values())
    hit = [k for k, w in words.items() if w == said]
    rest = [k for k, w in words.items() if w != said]
    for size in range(1, min(MAX_KEYS, len(varying)) + 1):
        for packages in subsets(varying, size):
            inside = {tuple(rows[k].get(p, "—") for p in packages) for k in hit}
            outside = {tuple(rows[k].get(p, "—") for p in packages) for k in rest}
            if not inside & outside:
                return Claim(word=said, packages=packages,
                             combos=tuple(sorted(inside, key=lambda c: [version_sort_key(v)
                                                                          for v in c])))
    return Claim(word=said, columns=tuple(columns[k].name for k in hit))


def _totals(session: CellResult, column: Column, links: Mapping[str, str]) -> Totals:
    suite = session.details.get("suite") or {}
    counts = suite.get("counts") or {}
    imported = "; ".join(
        f"{i.get('name')} {i.get('version') or ''} from {i.get('file')}".replace("  ", " ")
        for i in suite.get("imported") or ())
    failed_whole = session.outcome is Outcome.ERROR
    known = {w: i for i, w in enumerate(PYTEST_WORDS)}
    return Totals(column=column, outcome=session.outcome,
                  counts=tuple(sorted(((str(k), int(v)) for k, v in counts.items()),
                                      key=lambda kv: known.get(kv[0], 99))),
                  reason=session.reason if failed_whole else "", imported=imported,
                  log=links.get(session.cell_id, ""))


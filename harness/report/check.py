"""The consistency check: every claim a rendered report makes, recomputed from the record.

A report is only worth publishing if each sentence in it follows from what ran. This reads
what a report *says* (compat.md's coverage line, each failure's table and verdict, the
capability grid, the "since" lines; index.html's and probes.html's copies of them) and
checks each claim against the results, by its meaning, not by calling the code that wrote
it: "affected: torch 2.0.1, 2.1.2" holds when a documented failure reproduced in an
environment of each of those versions and in no environment of another; a grid's
"missing: 2.0.1" when the probe REPRODUCED there; and so on. What environments hold (their
versions) comes from the record through the same reading the model uses (``row_versions``).

``check_report`` returns the contradictions, one line each; an empty list means the report
says nothing the record does not.
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.core.results import CellResult, Outcome, counted
from harness.records.bisects import probe_result, read_bisects, reports_dir_of, sentence
from harness.records.compare import bumped, match_previous
from harness.records.select import choose_records, merged_cases, merged_environments
from harness.records.store import RunStore
from harness.report.site.model import (
    GRID_KIND,
    PROBES,
    probe_combinations,
    probe_packages,
    row_versions,
)
from harness.report.site.versions import by_priority, version_sort_key

_BADGE = re.compile(r"^\[?(?P<variant>.+): \S+ (?P<outcome>[A-Z_]+)(?: †)?(?:\]\(.*\))?$")
_ROW_ENV = re.compile(r"^(?P<label>.*) \(`(?P<env>[^`]*)`\)$")
_GRID_ROW = re.compile(r"^(?P<variant>.+) \((?P<packages>[^()]+)\)$")
_CHANGE = re.compile(r"^- (?P<kind>[a-z ]+): (?P<env>.+) `(?P<case>[^`]+)` @(?P<hw>\S+): "
                     r"(?P<before>[A-Z_]*) → (?P<after>[A-Z_]*)$")
#: compat.md's sections that are not a case's.
_NOT_CASES = ("Legend", "Against expectations", "Cases")
_MORE = re.compile(r" and (\d+) more \(the table lists them\)$")


@dataclass
class _Section:
    case: str
    verdict: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    suite: bool = False  # a test suite's section: totals, then the differing tests
    same: str = ""  # a suite's "Same in every environment" line
    differing: list[list[str]] = field(default_factory=list)
    differing_header: list[str] = field(default_factory=list)


def check_report(report_dir: Path, results: Sequence[CellResult],
                 environments: Mapping[str, Mapping[str, Any]],
                 cases: Mapping[str, Mapping[str, Any]],
                 previous: Sequence[CellResult] | None = None,
                 moved: Sequence[str] = (), reports_dir: Path | None = None) -> list[str]:
    """Contradictions between the report in ``report_dir`` and the results it reports."""
    md = (report_dir / "compat.md").read_text(encoding="utf-8").splitlines()
    by_env: dict[str, list[CellResult]] = defaultdict(list)
    for r in results:
        by_env[r.environment].append(r)
    versions = {env: row_versions(environments.get(env, {}), rs) for env, rs in by_env.items()}
    problems = _coverage(md, results)
    sections, grid, since = _sections(md)
    grid_bisects = [_unescape(ln[2:]) for ln in _grid_lines(md) if ln.startswith("- bisect: ")]
    broken = {env for env, rs in by_env.items() if _unbuildable(rs)}
    drawn = {s.case for s in sections}
    for case in sorted({r.case_id for r in results} - {PROBES} - drawn):
        problems.append(f"compat.md: no section for {case}, which has results")
    by_case: dict[str, list[CellResult]] = defaultdict(list)
    for r in results:
        by_case[r.case_id].append(r)
    for section in sections:
        mine = by_case.get(section.case, [])
        if section.suite:
            problems += _suite(section, mine, versions)
            continue
        problems += _table(section, mine, versions, broken)
        problems += _verdict(section, mine, cases, broken, reports_dir)
    problems += _grid(grid, by_case.get(PROBES, []), versions, cases)
    for part in grid_bisects:
        problems += _bisected("compat.md grid", PROBES, part, reports_dir)
    if previous is not None:
        problems += _since(since, results, previous, moved)
    problems += _html_copies(report_dir, md, grid, grid_bisects)
    problems += _failure_pages(report_dir, [s for s in sections if not s.suite])
    problems += _suite_pages(report_dir, [s for s in sections if s.suite])
    return problems


# ---------------------------------------------------------------- compat.md, read back

def _unescape(text: str) -> str:
    return (text.replace("&lt;", "<").replace("\\|", "\0").replace("\\\\", "\\")
            .replace("\0", "|"))


def _grid_lines(md: list[str]) -> list[str]:
    """The lines of compat.md's capability grid section."""
    start = md.index("## Capability grid") if "## Capability grid" in md else len(md)
    end = next((i for i in range(start + 1, len(md)) if md[i].startswith("## ")), len(md))
    return md[start + 1:end]


def _cells(line: str) -> list[str]:
    """A markdown table row's cells (``\\|`` inside a cell is text)."""
    inner = line.strip()[1:-1].replace("\\\\", "\x01").replace("\\|", "\x02")
    return [c.strip().replace("\x02", "\\|").replace("\x01", "\\\\") for c in inner.split("|")]


def _sections(md: list[str]) -> tuple[list[_Section], list[list[str]], list[str]]:
    sections: list[_Section] = []
    grid: list[list[str]] = []
    since: list[str] = []
    current: _Section | None = None
    in_grid = False
    for line in md:
        if line.startswith("## "):
            in_grid = line == "## Capability grid"
            title = line[3:]
            current = (None if in_grid or title in _NOT_CASES
                       or title.startswith("Environments that") else
                       _Section(case=title.removeprefix("Suite ").split(":", 1)[0],
                                suite=title.startswith("Suite ")))
            if current is not None:
                sections.append(current)
        elif line.startswith("Since `") or (line.startswith("- ") and _CHANGE.match(line)
                                            and current is None and not in_grid):
            since.append(line)
        elif in_grid and line.startswith("| ") and not line.startswith("| probe |"):
            grid.append(_cells(line))
        elif current is not None and line.startswith("**Verdict:** "):
            current.verdict = _unescape(line.removeprefix("**Verdict:** "))
        elif current is not None and line.startswith("**Same in every environment:** "):
            current.same = line.removeprefix("**Same in every environment:** ")
        elif current is not None and current.suite and line.startswith("| test | "):
            current.differing_header = _cells(line)
        elif (current is not None and current.differing_header and line.startswith("| ")
              and not line.startswith("|---")):
            current.differing.append(_cells(line))
        elif current is not None and line.startswith("| ") and not current.header:
            current.header = _cells(line)
        elif current is not None and line.startswith("| ") and not line.startswith("|---"):
            current.rows.append(_cells(line))
    return sections, grid, since


# ---------------------------------------------------------------- the claims

def _coverage(md: list[str], results: Sequence[CellResult]) -> list[str]:
    line = next((ln for ln in md if ln.startswith("tested: ")), None)
    if line is None:
        return ["compat.md: no coverage line"]
    results = counted(results)  # a suite's session is its tests
    counts = Counter(str(r.outcome) for r in results)
    ran = sum(r.outcome is not Outcome.NOT_RUN for r in results)
    tested = sorted({r.hardware_target for r in results if r.outcome is not Outcome.NOT_RUN})
    want_counts = ", ".join(f"{counts[str(o)]} {o}" for o in Outcome if counts[str(o)])
    problems = []
    if f" — {ran:,} of {len(results):,} cells ran ({want_counts})" not in line:
        problems.append(f"coverage says {line!r}; the record has {ran:,} of "
                        f"{len(results):,} ran ({want_counts})")
    said = line.removeprefix("tested: ").split(" — ")[0].split(";")[0]
    if sorted(t for t in said.split(", ") if t != "nothing") != tested:
        problems.append(f"coverage says tested: {said}; the record ran on {tested or 'nothing'}")
    return problems


def _unbuildable(results: Sequence[CellResult]) -> bool:
    ran = [r for r in results if r.outcome is not Outcome.NOT_RUN]
    return bool(ran) and all(r.unbuilt for r in ran)


def _table(section: _Section, results: Sequence[CellResult],
           versions: Mapping[str, dict[str, str]], broken: set[str]) -> list[str]:
    where = f"compat.md {section.case}"
    ran = {r.environment for r in results if r.outcome is not Outcome.NOT_RUN
           and r.environment not in broken}
    if not section.header:
        return [] if not ran else [f"{where}: no table, though {len(ran)} environments ran"]
    keys = [] if section.header[0] == "environment" else section.header[0].split(" · ")
    hardware = section.header[1:]
    recorded_at: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for r in results:
        recorded_at[(r.environment, r.hardware_target)][r.variant] = str(r.outcome)
    problems, seen = [], set()
    for row in section.rows:
        match = _ROW_ENV.match(_unescape(row[0]))
        if match is None:
            problems.append(f"{where}: a row without its environment: {row[0]!r}")
            continue
        env = match["env"]
        seen.add(env)
        label = match["label"]
        if keys and label != " · ".join(f"{k} {versions.get(env, {}).get(k, '—')}"
                                        for k in keys):
            problems.append(f"{where}: {env} is labelled {label!r}; it holds "
                            + ", ".join(f"{k} {versions.get(env, {}).get(k, '—')}"
                                        for k in keys))
        for hw, text in zip(hardware, row[1:], strict=False):
            shown = {}
            for badge in filter(None, text.split("<br>")):
                m = _BADGE.match(_unescape(badge))
                if m is None:
                    problems.append(f"{where}: unreadable badge {badge!r}")
                    continue
                shown[m["variant"]] = m["outcome"]
            recorded = recorded_at.get((env, hw), {})
            if shown != recorded:
                problems.append(f"{where}: {env} @{hw} shows {shown}; the record has "
                                f"{recorded}")
    if seen != ran:
        problems.append(f"{where}: the table's environments {sorted(seen)} are not the ones "
                        f"that ran {sorted(ran)}")
    return problems


def _values(text: str, tested: Iterable[str]) -> tuple[set[str], int]:
    """A verdict's list of versions: ranges expanded over ``tested``; with the count of those
    it left out (``... and 3 more``)."""
    more = _MORE.search(text)
    hidden = int(more[1]) if more else 0
    text = _MORE.sub("", text)
    order = sorted(set(tested), key=version_sort_key)
    found: set[str] = set()
    for piece in filter(None, text.split(", ")):
        if "–" in piece and piece.split("–")[0] in order and piece.split("–")[1] in order:
            first, last = piece.split("–")
            found.update(order[order.index(first):order.index(last) + 1])
        else:
            found.add(piece)
    return found, hidden


def _same(where: str, said: set[str], hidden: int, want: set[str]) -> list[str]:
    ok = said <= want and len(said) + hidden == len(want) if hidden else said == want
    if ok:
        return []
    return [f"{where}: says {sorted(said, key=version_sort_key)}"
            + (f" and {hidden} more" if hidden else "")
            + f"; the record: {sorted(want, key=version_sort_key)}"]


def _verdict(section: _Section, results: Sequence[CellResult],
             cases: Mapping[str, Mapping[str, Any]], broken: set[str],
             reports_dir: Path | None = None) -> list[str]:
    where = f"compat.md {section.case} verdict"
    keys = [] if not section.header or section.header[0] == "environment" \
        else section.header[0].split(" · ")
    key = keys[0] if keys else None
    value: dict[str, str] = {}
    for row in section.rows:
        match = _ROW_ENV.match(_unescape(row[0]))
        if match is not None:
            parts = match["label"].split(" · ")
            value[match["env"]] = (parts[0].split(" ", 1)[1] if key and parts and " " in parts[0]
                                   else match["env"])
    ran = [r for r in results if r.environment in value]
    repro = {m["variant"] for m in cases.values()
             if m.get("case") == section.case and m.get("signatures")}
    repro |= {r.variant for r in results if r.signature or r.outcome is Outcome.REPRODUCED}
    by_env: dict[str, list[CellResult]] = defaultdict(list)
    for r in ran:
        by_env[r.environment].append(r)
    affected, clean = set(), set()
    for env, rs in by_env.items():
        reps = [r for r in rs if r.variant in repro and r.outcome is not Outcome.NOT_RUN]
        if any(r.outcome is Outcome.REPRODUCED for r in reps):
            affected.add(value[env])
        elif reps and all(r.outcome is Outcome.PASS for r in reps):
            clean.add(value[env])
    tested = set(value.values())
    name = f"{key} " if key else ""
    problems: list[str] = []
    said_parts = section.verdict.split(" · ") if section.verdict else []
    claimed = {"affected": False, "not affected": False}
    for part in said_parts:
        if part.startswith("affected: "):
            claimed["affected"] = True
            said, hidden = _values(part.removeprefix("affected: ").removeprefix(name), tested)
            problems += _same(f"{where} 'affected'", said, hidden, affected)
        elif part.startswith("not affected: "):
            claimed["not affected"] = True
            text = part.removeprefix("not affected: ").removeprefix(name)
            if text.startswith("≥ "):
                floor = text.removeprefix("≥ ")
                if floor not in clean or any(version_sort_key(a) >= version_sort_key(floor)
                                             for a in affected):
                    problems.append(f"{where}: says not affected from {floor}; clean: "
                                    f"{sorted(clean)}, affected: {sorted(affected)}")
            else:
                said, hidden = _values(text, tested)
                problems += _same(f"{where} 'not affected'", said, hidden, clean)
        elif part.startswith("bisect: "):
            problems += _bisected(where, section.case, part, reports_dir)
        else:
            problems += _other_part(where, part, ran, value, tested, key, by_env, results)
    if affected and not claimed["affected"]:
        problems.append(f"{where}: does not say it reproduced on {sorted(affected)}")
    if clean and not claimed["not affected"]:
        problems.append(f"{where}: does not say it did not reproduce on {sorted(clean)}")
    return problems


def _bisected(where: str, case: str, part: str, reports_dir: Path | None) -> list[str]:
    """A bisect's sentence holds when a bisect record of this case says it with the
    outcomes its probes' runs recorded (not the outcomes the bisect record repeats)."""
    if reports_dir is None:
        return [f"{where}: says {part!r}, but the run is outside a reports folder"]
    for record in read_bisects(reports_dir):
        if record.case != case:
            continue
        last = probe_result(reports_dir, record, record.last)
        first = probe_result(reports_dir, record, record.first)
        if last is None or first is None:
            continue  # its probes' runs are gone: it proves nothing
        seen = replace(record, last={**record.last, "outcome": last[0], "signature": last[1]},
                       first={**record.first, "outcome": first[0], "signature": first[1]})
        if sentence(seen) == part:
            return []
    return [f"{where}: says {part!r}, which no bisect of {case} shows in its probes' runs"]


def _other_part(where: str, part: str, ran: Sequence[CellResult], value: Mapping[str, str],
                tested: set[str], key: str | None, by_env: Mapping[str, list[CellResult]],
                results: Sequence[CellResult]) -> list[str]:
    name = f"{key} " if key else ""
    if part.endswith(": not tested this run"):
        hardware = part.removesuffix(": not tested this run").split("/")
        ran_there = [h for h in hardware if any(r.hardware_target == h and r.outcome
                                                is not Outcome.NOT_RUN for r in results)]
        return [f"{where}: says {'/'.join(ran_there)} not tested; cells ran there"] \
            if ran_there else []
    if part.startswith(("could not build: ", "the reproduction did not", "not run here")):
        return []
    # A variant's name may hold anything (a parametrized id): match the names the record has.
    match = next((m for variant in sorted({r.variant for r in results}, key=len, reverse=True)
                  if (m := re.match(rf"^(?P<variant>{re.escape(variant)})"
                                    r"(?::| (?P<verb>works|fails)) (?P<rest>.*)$", part))),
                 None)
    if match is None:
        return [f"{where}: an unreadable part {part!r}"]
    variant = match["variant"]
    mine = [r for r in ran if r.variant == variant]
    went = [r for r in mine if r.outcome not in (Outcome.NOT_RUN, Outcome.SKIP)]
    good = {value[r.environment] for r in went if r.outcome.passed}
    bad = {value[r.environment] for r in went if not r.outcome.passed}
    rest = match["rest"].split("; caveat: ")[0]
    if match["verb"] is None:  # "<variant>: not run (...)"
        return [f"{where}: says {variant} did not run; it ran in {len(went)} cells"] \
            if went else []
    if rest == "on every tested version":
        ok = (not bad and bool(good)) if match["verb"] == "works" else (not good and bool(bad))
        return [] if ok else [f"{where}: says {variant} {match['verb']} on every tested "
                              f"version; works on {sorted(good)}, fails on {sorted(bad)}"]
    works_text, _, fails_text = rest.removeprefix("on ").partition("; fails on ")
    said_good, hidden_good = _values(works_text.removeprefix(name), tested)
    said_bad, hidden_bad = _values(fails_text, tested)
    return (_same(f"{where} '{variant} works on'", said_good, hidden_good, good)
            + _same(f"{where} '{variant} fails on'", said_bad, hidden_bad, bad))


_SUITE_ROW = re.compile(r"^(?P<column>.+) \(`(?P<env>[^`]*)`\)$")
_SUITE_WORDS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
_CLAIM_WORDS = ("fails", "skipped", "not collected")


def _test_word(result: CellResult | None) -> str:
    """What a claim calls a test's outcome in one column (None: not collected there)."""
    if result is None:
        return "not collected"
    if result.outcome.failed or result.outcome is Outcome.MISSING:
        return "fails"
    return "skipped" if result.outcome is Outcome.SKIP else "passes"


def _suite(section: _Section, results: Sequence[CellResult],
           versions: Mapping[str, dict[str, str]]) -> list[str]:
    """A suite's totals are its tests' records counted by pytest's word; "same everywhere"
    counts the tests with one outcome in every column; each differing test's outcomes are
    the record's, and its claim ("fails with numpy 2.4.6") names exactly the columns where
    it does that."""
    where = f"compat.md suite {section.case}"
    problems: list[str] = []
    tests = [r for r in results if r.parent]
    columns: list[tuple[str, str]] = []
    names: dict[str, tuple[str, str]] = {}
    for row in section.rows:
        match = _SUITE_ROW.match(_unescape(row[0]))
        if match is None:
            problems.append(f"{where}: an unreadable totals row {row[0]!r}")
            continue
        hw = match["column"].rsplit(" @", 1)[-1]
        key = (match["env"], hw)
        columns.append(key)
        names[match["column"]] = key
        mine = Counter(str(r.details.get("pytest") or "") for r in tests
                       if (r.environment, r.hardware_target) == key)
        said = dict(zip(section.header[2:2 + len(_SUITE_WORDS)], row[2:2 + len(_SUITE_WORDS)],
                        strict=False))
        for word in _SUITE_WORDS:
            if said.get(word) != str(mine.get(word, 0)):
                problems.append(f"{where} {match['column']}: says {said.get(word)} {word}; "
                                f"the record has {mine.get(word, 0)}")
    by_test: dict[str, dict[tuple[str, str], CellResult]] = defaultdict(dict)
    for r in tests:
        by_test[r.variant][(r.environment, r.hardware_target)] = r
    same: Counter[str] = Counter()
    differ: set[str] = set()
    for test, got in by_test.items():
        words = {_test_word(got.get(k)) for k in columns}
        if len(words) == 1:
            same[words.pop()] += 1
        else:
            differ.add(test)
    said_same = {w: int(n) for n, w in re.findall(
        r"(\d+) (pass|fail|skipped|not collected) everywhere", section.same)}
    want_same = {{"passes": "pass", "fails": "fail"}.get(w, w): n for w, n in same.items()}
    if said_same != want_same:
        problems.append(f"{where}: says the same everywhere: {said_same}; the record: "
                        f"{want_same}")
    header = [_unescape(c) for c in section.differing_header[1:-2]]
    shown_tests = set()
    for row in section.differing:
        test = _unescape(row[0]).strip("`")
        shown_tests.add(test)
        got = by_test.get(test, {})
        for name, mark in zip(header, row[1:-2], strict=False):
            column = names.get(name)
            result = got.get(column) if column else None
            want = f"{result.outcome}" if result else "not collected"
            if mark.split(" ")[-1] != want.split(" ")[-1] or (result is None) != (
                    mark == "not collected"):
                problems.append(f"{where} {test} {name}: shows {mark!r}; the record: {want}")
        problems += _claim(f"{where} {test}", _unescape(row[-2]), got, columns, versions)
    if shown_tests != differ:
        problems.append(f"{where}: lists {len(shown_tests)} differing tests; the record has "
                        f"{len(differ)} ({sorted(differ ^ shown_tests)[:3]} ...)")
    return problems


def _claim(where: str, text: str, got: Mapping[tuple[str, str], CellResult],
           columns: Sequence[tuple[str, str]], versions: Mapping[str, dict[str, str]]
           ) -> list[str]:
    """``fails with numpy 2.4.6`` / ``fails with torch 2.0.1, 2.2.2 with numpy 2.4.6; ...`` /
    ``fails in COLUMN, COLUMN``: the columns it names are those where the test does that."""
    word = next((w for w in _CLAIM_WORDS if text.startswith(w + " ")), None)
    if word is None:
        return [f"{where}: an unreadable claim {text!r}"]
    rest = text[len(word) + 1:]
    doing = {k for k in columns if _test_word(got.get(k)) == word}
    if rest.startswith("in "):
        named = set(rest[3:].split(", "))
        want = {f"{_column_label(k, columns, versions)}" for k in doing}
        return [] if named == want else [f"{where}: says {text!r}; the record: {sorted(want)}"]
    combos: list[dict[str, set[str]]] = []
    for group in rest.removeprefix("with ").split("; "):
        parts: dict[str, set[str]] = {}
        for part in group.split(" with "):
            name, _, values = part.partition(" ")
            parts[name] = set(values.split(", "))
        combos.append(parts)

    def matches(key: tuple[str, str]) -> bool:
        have = {**versions.get(key[0], {}), "hardware": key[1]}
        return any(all(have.get(p, "—") in vs for p, vs in c.items()) for c in combos)

    named_cols = {k for k in columns if matches(k)}
    if named_cols != doing:
        return [f"{where}: says {text!r}; it {word} in {sorted(doing)}, and the claim names "
                f"{sorted(named_cols)}"]
    return []


def _column_label(key: tuple[str, str], columns: Sequence[tuple[str, str]],
                  versions: Mapping[str, dict[str, str]]) -> str:
    """A column's name as the table heads it: the versions that vary between the columns."""
    rows = [{**versions.get(k[0], {}), "hardware": k[1]} for k in columns]
    hardware = {k[1] for k in columns}
    names = by_priority(p for p in {p for r in rows for p in r if p != "hardware"}
                        if len({r.get(p, "—") for r in rows}) > 1)
    if len(hardware) > 1:
        names.append("hardware")
    mine = {**versions.get(key[0], {}), "hardware": key[1]}
    return (" · ".join(f"{p} {mine.get(p, '—')}" for p in names) or key[0]) + f" @{key[1]}"


def _combos(text: str, packages: Sequence[str]) -> set[tuple[str, ...]]:
    """``2.0.1, 2.2.2`` (one package) or ``torch 2.0.1, 2.2.2 with numpy 2.4.6; ...``."""
    if len(packages) == 1:
        return {(v,) for v in text.split(", ") if v}
    found = set()
    for group in text.split("; "):
        head, _, tail = group.partition(" with ")
        firsts = head.removeprefix(f"{packages[0]} ").split(", ")
        words = tail.split(" ")
        rest = tuple(words[i + 1] for i in range(0, len(words), 2))
        found |= {(first, *rest) for first in firsts}
    return found


def _grid(rows: list[list[str]], results: Sequence[CellResult],
          versions: Mapping[str, dict[str, str]],
          cases: Mapping[str, Mapping[str, Any]]) -> list[str]:
    hardware = sorted({r.hardware_target for r in results if r.outcome is not Outcome.NOT_RUN})
    at: dict[tuple[str, str], list[CellResult]] = defaultdict(list)
    for r in results:
        at[(r.variant, r.hardware_target)].append(r)
    problems = []
    for row in rows:
        match = _GRID_ROW.match(_unescape(row[0]))
        if match is None:
            problems.append(f"compat.md grid: an unreadable row {row[0]!r}")
            continue
        variant = match["variant"]
        packages = probe_packages(variant, cases)
        if match["packages"] != " × ".join(packages):
            problems.append(f"compat.md grid {variant}: about {match['packages']}; the probe "
                            f"declares {' × '.join(packages)}")
        for hw, text in zip(hardware, row[1:], strict=False):
            mine = at.get((variant, hw), [])
            want = probe_combinations(mine, versions, packages)
            said: dict[str, set[tuple[str, ...]]] = defaultdict(set)
            untested = 0
            for part in _unescape(text).split(" · "):
                word, _, found = part.partition(": ")
                if word in ("works", "missing", "failed"):
                    said[word] = _combos(found, packages)
                elif part.startswith("untested ("):
                    untested = int(part.removeprefix("untested (").rstrip(")"))
            if {k: v for k, v in said.items() if v} != {k: v for k, v in want.items() if v}:
                problems.append(f"compat.md grid {variant} @{hw}: says {dict(said)}; the "
                                f"record: {dict(want)}")
            silent = sum(r.outcome not in GRID_KIND for r in mine)
            if not said and untested != silent:
                problems.append(f"compat.md grid {variant} @{hw}: untested ({untested}); the "
                                f"record has {silent} cells that said nothing")
    return problems


def _since(lines: list[str], results: Sequence[CellResult],
           previous: Sequence[CellResult], moved: Sequence[str] = ()) -> list[str]:
    now = {r.logical_key: str(r.outcome) for r in results}
    before = {k: str(r.outcome) for k, r in match_previous(previous, results, moved).items()}
    problems = []
    for line in lines:
        match = _CHANGE.match(line)
        if match is None:
            continue
        key = (match["env"], match["case"], match["hw"])
        if (before.get(key, ""), now.get(key, "")) != (match["before"], match["after"]):
            problems.append(f"compat.md: says {line[2:]!r}; the records: "
                            f"{before.get(key) or '(none)'} → {now.get(key) or '(none)'}")
    return problems


# ---------------------------------------------------------------- the pages say the same

def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment.replace("<br>", " · "))).strip()


def _html_copies(report_dir: Path, md: list[str], grid: list[list[str]],
                  grid_bisects: Sequence[str] = ()) -> list[str]:
    problems = []
    index = report_dir / "index.html"
    if index.is_file():
        found = re.search(r'<p class="meta" id="coverage">(.*?)</p>',
                          index.read_text(encoding="utf-8"), re.S)
        line = next((ln for ln in md if ln.startswith("tested: ")), "")
        if found is None or _text(found[1]) != line:
            problems.append("index.html: its coverage line is not compat.md's")
    probes = report_dir / "probes.html"
    if probes.is_file() and grid:
        page = probes.read_text(encoding="utf-8")
        rows = re.findall(r'<tr><th class="row">(.*?)</th>(.*?)</tr>', page, re.S)
        shown = [[_text(name), *(_text(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tds,
                                                                  re.S))]
                 for name, tds in rows]
        if shown != [[_unescape(c) for c in row] for row in grid]:
            problems.append("probes.html: its grid is not compat.md's")
        said = [_text(li) for li in re.findall(r"<li>(.*?)</li>", "".join(re.findall(
            r'<ul class="bisects">(.*?)</ul>', page, re.S)), re.S)]
        if said != list(grid_bisects):
            problems.append("probes.html: its bisect findings are not compat.md's")
    return problems


def check_run(stores: Sequence[RunStore], report_dir: Path,
              previous: RunStore | None = None) -> list[str]:
    """``check_report`` for the report of ``stores`` (the records ``harness report`` read),
    against ``previous`` for the "since" lines."""
    results = [r for _, r in choose_records(stores)[0].values()]
    # The run before as the report's "what changed" read it (diff_runs over its results).
    before = previous.results() if previous is not None else None
    return check_report(report_dir, results, merged_environments(s.meta for s in stores),
                        merged_cases(stores), before, bumped(s.meta for s in stores),
                        reports_dir_of(stores[0].run_dir) if stores else None)


_PAGE_ROW = re.compile(r'<tr><th class="row" title="([^"]*)">.*?</th>(.*?)</tr>', re.S)
_PAGE_BADGE = re.compile(r'<span class="badge [^"]*" title="([^"]*)">')
_TITLE = re.compile(r"^(?P<variant>.*): (?P<outcome>[A-Z_]+)(?: — .*)?$", re.S)


def _failure_pages(report_dir: Path, sections: Sequence[_Section]) -> list[str]:
    """Each failure page, and the index, say the verdict compat.md says; the page's badges
    are compat.md's (its first page: 200 rows)."""
    problems = []
    index = report_dir / "index.html"
    verdicts = ([_text(v) for v in re.findall(r'<div class="verdict">(.*?)</div>',
                                              index.read_text(encoding="utf-8"), re.S)]
                if index.is_file() else None)
    if verdicts is not None and verdicts != [s.verdict for s in sections]:
        problems.append("index.html: its verdicts are not compat.md's")
    for section in sections:
        page = report_dir / f"failure-{re.sub(r'[^a-z0-9_-]+', '-', section.case.lower())}.html"
        if not page.is_file():
            continue
        text = page.read_text(encoding="utf-8")
        found = re.search(r'<div class="verdict" id="verdict">(.*?)</div>', text, re.S)
        if found is None or _text(found[1]) != section.verdict:
            problems.append(f"{page.name}: its verdict is not compat.md's")
        md_rows = {}
        for row in section.rows:
            match = _ROW_ENV.match(_unescape(row[0]))
            if match is not None:
                md_rows[match["env"]] = [sorted(_badges(c)) for c in row[1:]]
        for env, cells in _PAGE_ROW.findall(text):
            env = html.unescape(env)
            shown = [sorted(_page_badges(td)) for td in re.findall(r"<td>(.*?)</td>", cells,
                                                                     re.S)]
            if md_rows.get(env) != shown:
                problems.append(f"{page.name}: {env} shows {shown}; compat.md "
                                f"{md_rows.get(env)}")
    return problems


def _mark(text: str) -> str:
    """A test's outcome in a column as the page shows it: ``✅ PASS`` reads ``PASS``."""
    return text if text == "not collected" else text.split(" ")[-1]


def _suite_pages(report_dir: Path, sections: Sequence[_Section]) -> list[str]:
    """Each suite's page shows compat.md's differing tests: the same outcomes and claims."""
    problems = []
    for section in sections:
        page = report_dir / f"suite-{re.sub(r'[^a-z0-9_-]+', '-', section.case.lower())}.html"
        if not page.is_file():
            problems.append(f"{page.name}: missing, though compat.md has the suite")
            continue
        table = re.search(r'<table class="grid" id="differing">(.*?)</table>',
                          page.read_text(encoding="utf-8"), re.S)
        shown = [] if table is None else [
            [_text(th), *(_text(td) for td in re.findall(r"<td[^>]*>(.*?)</td>", tds, re.S))]
            for th, tds in re.findall(r'<tr><th class="row">(.*?)</th>(.*?)</tr>', table[1],
                                      re.S)]
        said = [[_unescape(row[0]).strip("`"),
                 *(_mark(_unescape(c)) for c in row[1:-2]),
                 *(_unescape(c).replace("<br>", " · ") for c in row[-2:])]
                for row in section.differing]
        if shown != said:
            problems.append(f"{page.name}: its differing tests are not compat.md's")
    return problems


def _badges(cell: str) -> list[tuple[str, str]]:
    found = []
    for badge in filter(None, cell.split("<br>")):
        m = _BADGE.match(_unescape(badge))
        if m is not None:
            found.append((m["variant"], m["outcome"]))
    return found


def _page_badges(cell: str) -> list[tuple[str, str]]:
    found = []
    for title in _PAGE_BADGE.findall(cell):
        title = html.unescape(title).split(" (caveat: ")[0]
        m = _TITLE.match(title)
        if m is not None:
            found.append((m["variant"], m["outcome"]))
    return found

"""The consistency check: each claim of a report's model (``site.model.Site``) recomputed by
its meaning from the record, not by the code that made it; the contradictions, a line each."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.core.results import CellResult, Outcome, as_mapping, counted
from harness.core.words import plural
from harness.records.bisects import probe_result, read_bisects, reports_dir_of, sentence
from harness.records.compare import choose_records, match_previous
from harness.records.store import RunStore
from harness.report.build import moved_class, prepare
from harness.report.data import Report
from harness.report.site.model import (
    GRID_KIND,
    PROBES,
    UNRUN,
    FailureTable,
    Grid,
    Header,
    Site,
    group,
    planned,
    probe_packages,
    row_versions,
    unbuildable,
)
from harness.report.site.suites import PYTEST_WORDS, SESSION, SuiteTable, suite_names
from harness.report.site.suites import word as claim_word
from harness.report.site.versions import combinations, varying

Versions = Mapping[str, Mapping[str, str]]


def check(site: Site, results: Sequence[CellResult],
          environments: Mapping[str, Mapping[str, Any]], cases: Mapping[str, Mapping[str, Any]],
          previous: Sequence[CellResult] | None = None, moved: Sequence[str] = (),
          reports_dir: Path | None = None, planned: int = 0, plan: Collection[str] = ()
          ) -> list[str]:
    """Contradictions between the report's model and the results it reports; ``previous``:
    the run "what changed" is since (its results), ``moved``: the keys a bump replaced,
    ``plan``: the cell ids planned (an interrupted run's not run are not gone)."""
    by_env = group(results, lambda r: r.environment)
    versions = {env: row_versions(environments.get(env, {}), rs) for env, rs in by_env.items()}
    broken = {env for env, rs in by_env.items() if unbuildable(rs) is not None}
    by_case = group(results, lambda r: r.case_id)
    suites = suite_names(results, cases)
    problems = _header(site.header, results, planned) + _differ("the report", {
        "could not build": sorted(e for e, _ in site.unbuildable),
        "packages came from": dict(site.provenance),
        "failure tables for": sorted(t.case for t in site.failures),
        "suite tables for": sorted(t.suite for t in site.suites)}, {
        "could not build": sorted(broken),
        "packages came from": {env: said for env, rs in by_env.items() for r in rs
                               if (said := tuple(as_mapping(r.fingerprint).get("provenance")
                                                 or ()))},
        "failure tables for": sorted(set(by_case) - suites - {PROBES}),
        "suite tables for": sorted(suites & set(by_case))})
    for table in site.failures:
        mine = by_case.get(table.case, [])
        problems += _table(table, mine, versions, broken)
        problems += _verdict(table, mine, versions, cases, broken, reports_dir)
    problems += _grid(site.grid, by_case.get(PROBES, []), versions, cases, reports_dir)
    for suite in site.suites:
        problems += _suite(suite, by_case.get(suite.suite, []), versions)
    if previous is not None:
        problems += _changes(site.changes, results, previous, moved, plan)
    return problems


def check_report(report: Report) -> list[str]:
    """``check`` of the model ``report`` renders, against its records read apart from it."""
    results = list(report.given) if report.given is not None else [
        r for _, r in choose_records(report.stores)[0].values()]
    before = report.previous.results() if report.previous is not None else None
    return check(report.site, results, report.environments, report.cases, before,
                 report.moved, reports_dir_of(report.stores[0].run_dir),
                 planned(report.metas, report.damaged), report.plan or ())


def check_run(stores: Sequence[RunStore], report_dir: Path,
              previous: RunStore | None = None) -> list[str]:
    """``check_report`` of the report of ``stores`` in ``report_dir``, since ``previous``."""
    return check_report(prepare(stores, report_dir, previous=previous))


def _differ(where: str, said: Mapping[str, object], want: Mapping[str, object]) -> list[str]:
    """A line for each claim ``said`` that is not what the record has (``want``)."""
    return [f"{where} says {name} {said[name]}; the record: {want[name]}"
            for name in want if said[name] != want[name]]


def _same_set(what: str, said: Sequence[str], want: set[str]) -> list[str]:
    if sorted(said) == sorted(want):
        return []
    return [f"{what} for {sorted(said)}; the record has results of {sorted(want)}"]


def _header(header: Header, results: Sequence[CellResult], planned: int) -> list[str]:
    """The coverage line: cells (a session counted as its tests; at least the ``planned``
    of an interrupted run), ran, counts, hardware."""
    cells = counted(results)
    counts = Counter(str(r.outcome) for r in cells)
    tested = sorted({r.hardware_target for r in results if r.outcome not in UNRUN})
    want = {"cells": max(len(cells), planned),
            "ran": len(cells) - sum(counts[str(o)] for o in UNRUN),
            "counts": dict(counts), "tested": tested,
            "not tested": sorted({r.hardware_target for r in results} - set(tested))}
    return _differ("the coverage line", {
        "cells": header.cells, "ran": header.ran, "counts": dict(header.counts),
        "tested": list(header.tested), "not tested": list(header.not_tested)}, want)


def _table(table: FailureTable, results: Sequence[CellResult], versions: Versions,
           broken: set[str]) -> list[str]:
    """Rows: the environments that ran, labelled by the versions that vary; badges: outcomes."""
    where = table.case
    ran = {r.environment for r in results
           if r.outcome is not Outcome.NOT_RUN and r.environment not in broken}
    problems = _same_set(f"{where}: rows", [row.environment for row in table.rows], ran)
    hardware = sorted({r.hardware_target for r in results
                       if r.outcome is not Outcome.NOT_RUN and r.environment in ran})
    if list(table.hardware) != hardware:
        problems.append(f"{where}: columns {list(table.hardware)}; it ran on {hardware}")
    if set(table.varying) != varying(versions[e] for e in ran):
        problems.append(f"{where}: labelled by {list(table.varying)}; the versions that vary: "
                        f"{sorted(varying(versions[e] for e in ran))}")
    recorded: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for r in results:
        recorded[(r.environment, r.hardware_target)][r.variant] = str(r.outcome)
    for row in table.rows:
        mine = versions.get(row.environment, {})
        label = " · ".join(f"{k} {mine.get(k, '—')}" for k in table.varying) or row.environment
        if row.label != label:
            problems.append(f"{where}: {row.environment} is labelled {row.label!r}; it holds "
                            f"{label!r}")
        for hw in table.hardware:
            shown = {b.variant: str(b.outcome) for b in row.cells.get(hw, ())}
            if shown != recorded.get((row.environment, hw), {}):
                problems.append(f"{where}: {row.environment} @{hw} shows {shown}; the record "
                                f"has {recorded.get((row.environment, hw), {})}")
    return problems


def _verdict(table: FailureTable, results: Sequence[CellResult], versions: Versions,
             cases: Mapping[str, Mapping[str, Any]], broken: set[str],
             reports_dir: Path | None) -> list[str]:
    """Each part of the verdict, by the versions of the package the table varies most in."""
    key = table.varying[0] if table.varying else None
    value = {row.environment: versions.get(row.environment, {}).get(key, "—") if key else
             row.environment for row in table.rows}
    ran = [r for r in results if r.environment in value]
    repro = {m["variant"] for m in cases.values()
             if m.get("case") == table.case and m.get("signatures")}
    repro |= {r.variant for r in results if r.signature or r.outcome is Outcome.REPRODUCED}
    affected, clean = set(), set()
    for env, rs in group(ran, lambda r: r.environment).items():
        reps = [r for r in rs if r.variant in repro and r.outcome is not Outcome.NOT_RUN]
        if any(r.outcome is Outcome.REPRODUCED for r in reps):
            affected.add(value[env])
        elif reps and all(r.outcome is Outcome.PASS for r in reps):
            clean.add(value[env])
    helped: dict[str, tuple[list[str], list[str]]] = {}
    for variant, rs in group((r for r in ran if r.variant not in repro),
                             lambda r: r.variant).items():
        went = [r for r in rs if r.outcome not in (*UNRUN, Outcome.SKIP)]
        helped[variant] = (sorted({value[r.environment] for r in went if r.outcome.passed}),
                           sorted({value[r.environment] for r in went if not r.outcome.passed}))
    ran_on = {r.hardware_target for r in results if r.outcome is not Outcome.NOT_RUN}
    want = {"a reproduction": bool(repro), "affected": sorted(affected),
            "not affected": sorted(clean), "workarounds": helped,
            "not tested": sorted({r.hardware_target for r in results} - ran_on),
            "could not build": sorted({r.environment for r in results} & broken)}
    said = {"a reproduction": table.reproduces, "affected": sorted(table.affected),
            "not affected": sorted(table.clean), "workarounds": {
                w.variant: (sorted(w.works), sorted(w.fails)) for w in table.workarounds},
            "not tested": sorted(table.not_tested),
            "could not build": sorted(e for e, _ in table.unbuildable)}
    problems = _differ(f"{table.case}: the verdict", said, want)
    for part in table.bisected:
        problems += _bisected(f"{table.case} verdict", table.case, part, reports_dir)
    return problems


def _bisected(where: str, case: str, part: str, reports_dir: Path | None) -> list[str]:
    """A bisect's sentence holds when a bisect of this case says it with its probes' runs'
    recorded outcomes (not those the bisect record repeats)."""
    if reports_dir is None:
        return [f"{where}: says {part!r}, but the run is outside a reports folder"]
    for record in (r for r in read_bisects(reports_dir) if r.case == case):
        last = probe_result(reports_dir, record, record.last)
        first = probe_result(reports_dir, record, record.first)
        if last is None or first is None:
            continue  # its probes' runs are gone: it proves nothing
        seen = replace(record, last={**record.last, "outcome": last[0], "signature": last[1]},
                       first={**record.first, "outcome": first[0], "signature": first[1]})
        if sentence(seen) == part:
            return []
    return [f"{where}: says {part!r}, which no bisect of {case} shows in its probes' runs"]


def _grid(grid: Grid | None, results: Sequence[CellResult], versions: Versions,
          cases: Mapping[str, Mapping[str, Any]], reports_dir: Path | None) -> list[str]:
    """Each probe's cell names the version combinations where it worked, found the capability
    missing, or failed; the rest counted untested."""
    if grid is None:
        return ["no capability grid, though probes have results"] if results else []
    hardware = sorted({r.hardware_target for r in results if r.outcome is not Outcome.NOT_RUN})
    problems = [] if list(grid.hardware) == hardware else [
        f"grid: columns {list(grid.hardware)}; probes ran on {hardware}"]
    problems += _same_set("grid: rows", [v for v, _, _ in grid.rows],
                          {r.variant for r in results})
    at = group(results, lambda r: (r.variant, r.hardware_target))
    for variant, about, cells in grid.rows:
        packages = probe_packages(cases, variant)
        if about != " × ".join(packages):
            problems.append(f"grid {variant}: about {about}; the probe declares {packages}")
        for hw in hardware:
            want: dict[str, set[tuple[str, ...]]] = defaultdict(set)
            for r in at.get((variant, hw), []):
                if r.outcome in GRID_KIND:
                    want[GRID_KIND[r.outcome]].add(
                        tuple(versions[r.environment].get(p, "—") for p in packages))
            cell = cells.get(hw)
            said = {} if cell is None else {word: found for word, found in (
                ("works", cell.works), ("missing", cell.missing), ("failed", cell.failed))
                if found}
            shown = {word: combinations(found, packages) for word, found in want.items()}
            if said != shown:  # the record's combinations, as a reader takes them in
                problems.append(f"grid {variant} @{hw}: says {said}; the record: {shown}")
            silent = sum(r.outcome not in GRID_KIND for r in at.get((variant, hw), []))
            if cell is not None and cell.untested != silent:
                problems.append(f"grid {variant} @{hw}: untested ({cell.untested}); the record "
                                f"has {plural(silent, 'cell')} that said nothing")
    for part in grid.bisected:
        problems += _bisected("grid", PROBES, part, reports_dir)
    return problems


def _word(result: CellResult | None) -> str:
    """What a claim calls a test's outcome in one column (None: not collected there)."""
    return claim_word(result.outcome if result is not None else None)


def _suite(table: SuiteTable, results: Sequence[CellResult], versions: Versions) -> list[str]:
    """Totals by pytest's words; "same everywhere" counts; each differing test's outcomes, and
    its claim names exactly the columns where it does that."""
    where = f"suite {table.suite}"
    tests = [r for r in results if r.variant != SESSION]
    keys = [(c.environment, c.hardware) for c in table.columns]
    ran = {(r.environment, r.hardware_target) for r in results
           if r.variant != SESSION or r.outcome is not Outcome.NOT_RUN}
    problems = _same_set(f"{where}: columns", [f"{e} @{h}" for e, h in keys],
                         {f"{e} @{h}" for e, h in ran})
    rows = {k: {**versions.get(k[0], {}), "hardware": k[1]} for k in keys}
    vary = varying(rows.values()) - ({"hardware"} if len({h for _, h in keys}) < 2 else set())
    if set(table.varying) != vary:
        problems.append(f"{where}: labelled by {list(table.varying)}; varying: {sorted(vary)}")
    for column in table.columns:
        mine = rows[(column.environment, column.hardware)]
        label = " · ".join(f"{p} {mine.get(p, '—')}" for p in table.varying)
        if column.label != (label or column.environment):
            problems.append(f"{where}: a column labelled {column.label!r} holds {label!r}")
    for totals in table.totals:
        key = (totals.column.environment, totals.column.hardware)
        recorded = Counter(str(r.details.get("pytest") or "") for r in tests
                           if r.parent and (r.environment, r.hardware_target) == key)
        said = dict(totals.counts)
        for w in PYTEST_WORDS:
            if said.get(w, 0) != recorded.get(w, 0):
                problems.append(f"{where} {totals.column.name}: says {said.get(w, 0)} {w}; "
                                f"the record has {recorded.get(w, 0)}")
    by_test: dict[str, dict[tuple[str, str], CellResult]] = defaultdict(dict)
    for r in tests:
        by_test[r.variant][(r.environment, r.hardware_target)] = r
    same = Counter(next(iter(words)) for got in by_test.values()
                   if len(words := {_word(got.get(k)) for k in keys}) == 1)
    if dict(table.same) != dict(same):
        problems.append(f"{where}: says the same everywhere: {dict(table.same)}; the record: "
                        f"{dict(same)}")
    problems += _same_set(f"{where}: differing tests", [d.test for d in table.differing],
                          {t for t in by_test if len({_word(by_test[t].get(k))
                                                      for k in keys}) > 1})
    names = {c.name: (c.environment, c.hardware) for c in table.columns}
    for test in table.differing:
        got = by_test.get(test.test, {})
        outcomes = tuple(got[k].outcome if k in got else None for k in keys)
        if test.outcomes != outcomes:
            problems.append(f"{where} {test.test}: shows {test.outcomes}; the record: {outcomes}")
        claim = test.claim
        doing = {k for k in keys if _word(got.get(k)) == claim.word}
        named = ({names.get(n) for n in claim.columns} if not claim.packages else
                 {k for k in keys if tuple(rows[k].get(p, "—") for p in claim.packages)
                  in set(claim.combos)})
        if named != doing:
            problems.append(f"{where} {test.test}: says {claim.text!r}; it {claim.word} in "
                            f"{sorted(doing)}, and the claim names {sorted(named, key=str)}")
    return problems


def _changes(changes: Sequence[Mapping[str, Any]], results: Sequence[CellResult],
             previous: Sequence[CellResult], moved: Sequence[str], plan: Collection[str]
             ) -> list[str]:
    """Each "what changed" line's outcomes and class; every cell whose outcome changed (came,
    or went, but in a bump) has its line."""
    now = {r.logical_key: r.outcome for r in results}
    matched = match_previous(previous, results, moved)
    before = {k: r.outcome for k, r in matched.items()}
    problems, listed = [], set()
    for change in changes:
        key = (change["environment"], change["case"], change["hardware"])
        listed.add(key)
        was, is_ = before.get(key), now.get(key)
        kind = ("new cell" if was is None else "gone" if is_ is None
                else "versions changed" if was == is_ else moved_class(was, is_))
        want = (kind, str(was or ""), str(is_ or ""))
        if (change["class"], change["before"], change["after"]) != want:
            problems.append(f"what changed: says {change['class']} {key}: {change['before']} → "
                            f"{change['after']}; the records: {' '.join(want[1:])} ({want[0]})")
    planned = set(plan)
    keys = now.keys() | (set() if moved else {k for k, r in matched.items()
                                              if r.cell_id not in planned})
    for key in sorted(k for k in keys - listed if before.get(k) != now.get(k)):
        problems.append(f"what changed: no line for {key}: {before.get(key)} → {now.get(key)}")
    return problems

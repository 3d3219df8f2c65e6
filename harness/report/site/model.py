"""What the report says, as plain data (a table and verdict per documented failure, the
capability grid, the header, what changed): pure functions of the results, in a stable order."""

from __future__ import annotations

import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.core.results import CellResult, Outcome, as_mapping, counted
from harness.records.store import said
from harness.report.site.suites import SuiteTable, suite_names, suite_table
from harness.report.site.versions import (
    PRIORITY,
    by_priority,
    combinations,
    label,
    slug,
    varying,
    version_sort_key,
)

#: Packages that are tools of the harness, not versions a reader compares.
_NOT_SHOWN = {"pytest", "setuptools", "wheel", "ninja", "pip"}
PROBES = "probes"
#: What the coverage line does not count as ran: not run here, or its shard never reported.
UNRUN = (Outcome.NOT_RUN, Outcome.MISSING)
K = TypeVar("K")
R = TypeVar("R")
SHORT = {**{o: str(o) for o in Outcome}, Outcome.REPRODUCED: "REPRO", Outcome.NOT_RUN: "not run"}


def css(outcome: Outcome) -> str:
    """The site's class of an outcome's colours."""
    return "o-" + str(outcome).lower().replace("_", "-")


@dataclass(frozen=True, kw_only=True)
class Badge:
    """One variant's outcome in a table cell."""

    variant: str
    outcome: Outcome
    reason: str
    log: str  # relative link, or ""
    caveat: str = ""

    @property
    def css(self) -> str:
        return css(self.outcome)

    @property
    def label(self) -> str:
        return SHORT[self.outcome]


@dataclass(frozen=True, kw_only=True)
class Row:
    environment: str
    versions: dict[str, str]  # package -> version (resolved where it was built, else the pin)
    label: str  # the versions that vary in this table
    cells: dict[str, tuple[Badge, ...]]  # hardware -> badges


@dataclass(frozen=True, kw_only=True)
class Workaround:
    """A variant that does not reproduce: the versions it worked and failed on."""

    variant: str
    works: frozenset[str]
    fails: frozenset[str]
    why: str = ""  # the first skip's reason, where it never ran
    caveat: str = ""

    def text(self, name: str, tested: Sequence[str] | None) -> str:
        """What the verdict says of it (``name``: the package's, "torch ")."""
        if not (self.works or self.fails):
            return f"{self.variant}: not run" + (f" ({self.why})" if self.why else "")
        caveat = f"; caveat: {self.caveat}" if self.caveat else ""
        if not self.fails:
            return f"{self.variant} works on every tested version{caveat}"
        if not self.works:
            return f"{self.variant} fails on every tested version"
        return (f"{self.variant} works on {name}{version_list(self.works, tested)}; "
                f"fails on {version_list(self.fails, tested)}{caveat}")


@dataclass(frozen=True, kw_only=True)
class FailureTable:
    case: str
    failure: str
    title: str
    upstream: tuple[str, ...]
    signatures: tuple[str, ...]
    varying: tuple[str, ...]
    hardware: tuple[str, ...]  # columns drawn
    rows: tuple[Row, ...]
    not_run_rows: int  # environments whose cells of this case are NOT_RUN everywhere
    not_tested: tuple[str, ...]  # hardware targets planned but NOT_RUN everywhere
    unbuildable: tuple[tuple[str, str], ...]  # (environment, reason)
    # The verdict's parts, by the rows' versions of ``varying[0]`` (else their environments):
    reproduces: bool  # a variant reproduces (declared so, or seen doing it)
    affected: frozenset[str]  # where it reproduced
    clean: frozenset[str]  # where every reproducing variant passed
    workarounds: tuple[Workaround, ...]  # the other variants
    bisected: tuple[str, ...] = ()  # what bisects of this case found

    @property
    def slug(self) -> str:
        return slug(self.case)

    @cached_property
    def verdict(self) -> tuple[str, ...]:
        """The verdict line's parts, as the pages say them."""
        key = self.varying[0] if self.varying else None
        name = f"{key} " if key else ""
        tested = [row.versions.get(key, "—") for row in self.rows] if key else None
        parts: list[str] = []
        if self.affected:
            parts.append(f"affected: {name}{version_list(self.affected, tested)}")
        if self.clean:
            low = min(self.clean, key=version_sort_key)
            # Every clean version above every affected one: the lowest clean above the highest.
            above = self.affected and key and version_sort_key(low) > max(
                map(version_sort_key, self.affected))
            parts.append(f"not affected: {name}"
                         + (f"≥ {low}" if above else version_list(self.clean, tested)))
        if self.reproduces and self.rows and not (self.affected or self.clean):
            parts.append("the reproduction did not run to a verdict here (see the table)")
        elif self.reproduces and not self.rows:
            parts.append("not run here")
        parts += [w.text(name, tested) for w in self.workarounds]
        if self.not_tested:
            parts.append(f"{'/'.join(self.not_tested)}: not tested this run")
        if self.unbuildable:
            parts.append(f"could not build: {', '.join(e for e, _ in self.unbuildable)}")
        return (*parts, *self.bisected)

    @property
    def caveats(self) -> list[tuple[str, str]]:
        """Each (variant, caveat) of the table's badges, for compat.md's footnotes."""
        return sorted({(b.variant, b.caveat) for row in self.rows for bs in row.cells.values()
                       for b in bs if b.caveat})


@dataclass(frozen=True, kw_only=True)
class GridCell:
    """One probe on one hardware target: the version combinations of each kind (REPRODUCED
    found the capability missing)."""

    works: tuple[str, ...]  # PASS
    missing: tuple[str, ...]  # REPRODUCED
    failed: tuple[str, ...]  # FAIL, ERROR, CRASH, TIMEOUT, FLAKY: broke otherwise
    untested: int  # SKIP, NOT_RUN, MISSING: said nothing
    reason: str  # the first skip or failure reason, for the tooltip
    packages: int = 1  # how many packages each combination names

    @property
    def css(self) -> str:
        shown = [kind for kind, found in (("o-pass", self.works), ("o-reproduced", self.missing),
                                          ("o-fail", self.failed)) if found]
        if not shown:
            return "o-skip"
        return shown[0] if len(shown) == 1 else "o-mixed"

    @property
    def text(self) -> str:
        """What compat.md says of the cell."""
        return " · ".join(f"{word}: {found}" for word, found in self.parts()) or (
            f"untested ({self.untested})" if self.untested else "—")

    def parts(self) -> tuple[tuple[str, str], ...]:
        """``(word, combinations)`` for each kind found: what the page and compat.md say."""
        joiner = ", " if self.packages == 1 else "; "
        return tuple((word, joiner.join(found)) for word, found in (
            ("works", self.works), ("missing", self.missing), ("failed", self.failed)) if found)


@dataclass(frozen=True, kw_only=True)
class Grid:
    hardware: tuple[str, ...]
    # probe variant, the packages whose versions decide it ("torch × numpy"), hardware -> cell
    rows: tuple[tuple[str, str, dict[str, GridCell]], ...]
    bisected: tuple[str, ...] = ()  # what bisects of a probe found (records.bisects.sentence)


@dataclass(frozen=True, kw_only=True)
class Header:
    run_ids: tuple[str, ...]
    date: str
    harness: str
    matrix_sha256: str
    machines: tuple[str, ...]
    tested: tuple[str, ...]
    not_tested: tuple[str, ...]
    ran: int
    cells: int
    counts: tuple[tuple[str, int], ...]
    # A bump's ``--set`` (run.json ``set``): environments named for other versions hold these.
    sets: tuple[str, ...] = ()
    damaged: int = 0  # the record's lines left out (``records.store.Damaged``)

    @property
    def coverage(self) -> str:
        """The coverage line: what was tested, how many cells ran, the damaged lines left out."""
        return (f"tested: {', '.join(self.tested) or 'nothing'}"
                + (f"; not tested: {', '.join(self.not_tested)}" if self.not_tested else "")
                + f" — {self.ran:,} of {self.cells:,} cells ran ("
                + ", ".join(f"{n} {name}" for name, n in self.counts) + ")"
                + (f"; {said(self.damaged)}" if self.damaged else ""))


@dataclass(frozen=True, kw_only=True)
class Site:
    header: Header
    failures: tuple[FailureTable, ...]
    grid: Grid | None
    unbuildable: tuple[tuple[str, str], ...]
    changes: tuple[dict[str, Any], ...] = ()
    since: str | None = None
    suites: tuple[SuiteTable, ...] = ()  # one per test suite
    # Where each environment's compiled packages or image came from (a wheel folder's key,
    # built here, an image pulled from a registry), as its build recorded it.
    provenance: tuple[tuple[str, tuple[str, ...]], ...] = ()


def group(results: Iterable[R], key: Callable[[R], K]) -> dict[K, list[R]]:
    """``results`` by ``key``, each group in their order."""
    out: dict[K, list[R]] = defaultdict(list)
    for r in results:
        out[key(r)].append(r)
    return out


def spec_versions(env: Mapping[str, Any]) -> dict[str, str]:
    """What the environment asked for: ``torch==2.0.1`` -> 2.0.1, ``numpy<2`` -> <2."""
    out: dict[str, str] = {}
    for text in env.get("requirements") or ():
        try:
            req = Requirement(str(text))
        except InvalidRequirement:
            continue  # the record of a matrix this harness would refuse today
        pin = str(req.specifier)
        out[canonicalize_name(req.name)] = (
            "@" + req.url.rsplit("@", 1)[-1] if req.url  # a URL: the ref it pins
            else pin.removeprefix("==") if pin else "*")
    out.update((key, str(env[key])) for key in ("cuda", "python") if env.get(key))
    out["backend"] = str(env.get("backend") or "")
    return out


def row_versions(env: Mapping[str, Any], results: Sequence[CellResult]) -> dict[str, str]:
    """The spec's pins, replaced by what was really installed where the environment built."""
    versions = spec_versions(env)
    for r in results:
        key = as_mapping(as_mapping(r.fingerprint).get("key"))
        for name, version in key.items():
            if name not in _NOT_SHOWN and (name in versions or name in PRIORITY):
                versions[name] = str(version)
        if key:
            break
    return {k: v for k, v in versions.items() if k not in _NOT_SHOWN}


def unbuildable(results: Sequence[CellResult]) -> str | None:
    """Why an environment never built (every cell that ran unbuilt): its first reason line."""
    ran = [r for r in results if r.outcome is not Outcome.NOT_RUN]
    if ran and all(r.unbuilt for r in ran):
        return ran[0].reason.strip().splitlines()[0] if ran[0].reason.strip() else "ERROR"
    return None


def build_site(results: Sequence[CellResult], environments: Mapping[str, Mapping[str, Any]],
               cases: Mapping[str, Mapping[str, Any]], meta: Sequence[Mapping[str, Any]],
               links: Mapping[str, str], changes: Sequence[dict[str, Any]] = (),
               since: str | None = None, bisects: Mapping[str, Sequence[str]] | None = None,
               damaged: int = 0) -> Site:
    by_env = group(results, lambda r: r.environment)
    broken = {env: why for env, rs in by_env.items() if (why := unbuildable(rs))}
    versions = {env: row_versions(environments.get(env, {}), rs) for env, rs in by_env.items()}
    by_case = group(results, lambda r: r.case_id)
    suites = suite_names(results, cases)
    failures = tuple(_failure_table(c, rs, versions, cases, broken, links,
                                    (bisects or {}).get(c, ()))
                     for c, rs in by_case.items() if c != PROBES and c not in suites)
    probes = by_case.get(PROBES, [])
    return Site(header=_header(results, meta, damaged), failures=failures,
                grid=_grid(probes, versions, cases, (bisects or {}).get(PROBES, ()))
                if probes else None,
                unbuildable=tuple(sorted(broken.items())), changes=tuple(changes), since=since,
                suites=tuple(suite_table(c, rs, versions, cases, links)
                             for c, rs in by_case.items() if c in suites),
                provenance=tuple(sorted((env, said) for env, rs in by_env.items()
                                        if (said := provenance(rs)))))


def provenance(results: Sequence[CellResult]) -> tuple[str, ...]:
    """Where an environment's packages came from, as the first result that says it."""
    for r in results:
        said = as_mapping(r.fingerprint).get("provenance")
        if said:
            return tuple(map(str, said))
    return ()


def planned(meta: Sequence[Mapping[str, Any]], damaged: int) -> int:
    """The cells one record's run planned, less its ``damaged`` lines (an interrupted run
    recorded fewer); 0 for several records, or a run.json without the count."""
    cells = meta[0].get("cells") if len(meta) == 1 else None
    return cells - damaged if isinstance(cells, int) else 0


def _header(results: Sequence[CellResult], meta: Sequence[Mapping[str, Any]],
            damaged: int) -> Header:
    ran = [r for r in results if r.outcome not in UNRUN]
    tested = tuple(sorted({r.hardware_target for r in ran}))
    # Each (node, machine description) once: many cells share one machine's object.
    seen = {(r.node, id(r.hardware)): r.hardware for r in ran if r.hardware}
    machines = set()
    for (node, _), hw in seen.items():
        gpus = ", ".join(sorted({str(g.get("name", "GPU")) for g in hw.get("gpus") or ()}))
        machines.add(f"{node or '?'}: {hw.get('cpu', 'CPU')} × {hw.get('cpus', '?')}"
                     + (f", {gpus}" if gpus else ", no GPU"))
    created = min((float(m.get("created") or 0) for m in meta), default=0.0)
    cells = counted(results)
    counts = Counter(str(r.outcome) for r in cells)
    return Header(
        run_ids=tuple(str(m.get("run_id")) for m in meta),
        date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(created)) if created else "",
        harness=str(meta[0].get("harness") or "") if meta else "",
        matrix_sha256=str(meta[0].get("matrix_sha256") or "") if meta else "",
        machines=tuple(sorted(machines)), tested=tested,
        not_tested=tuple(sorted({r.hardware_target for r in results} - set(tested))),
        ran=len(cells) - sum(counts[str(o)] for o in UNRUN),
        cells=max(len(cells), planned(meta, damaged)),
        counts=tuple((str(o), counts[str(o)]) for o in Outcome if counts[str(o)]),
        sets=tuple(dict.fromkeys(f"{k}={v}" for m in meta
                                 for k, v in (m.get("set") or {}).items())), damaged=damaged)


def _failure_table(case: str, results: Sequence[CellResult],
                   versions: Mapping[str, dict[str, str]],
                   cases: Mapping[str, Mapping[str, Any]], broken: Mapping[str, str],
                   links: Mapping[str, str], bisected: Sequence[str] = ()) -> FailureTable:
    """``bisected``: what bisects of this case found, said after the verdict's own parts."""
    variants = [m for m in cases.values() if m.get("case") == case]
    meta = variants[0] if variants else {}
    # A variant that reproduces: declared so (its signatures), or seen doing it.
    repro = {m["variant"] for m in variants if m.get("signatures")} | {
        r.variant for r in results if r.signature or r.outcome is Outcome.REPRODUCED}
    by_env = group(results, lambda r: r.environment)
    ran_envs = {e: rs for e, rs in by_env.items() if e not in broken
                and any(r.outcome is not Outcome.NOT_RUN for r in rs)}
    drawn_hw = tuple(sorted({r.hardware_target for r in results
                             if r.outcome is not Outcome.NOT_RUN and r.environment in ran_envs}))
    vary = by_priority(varying(versions[e] for e in ran_envs), meta.get("about") or ())
    key = vary[0] if vary else None
    value = {e: versions[e].get(key, "—") if key else e for e in ran_envs}
    rows, affected, clean = [], set(), set()
    for env, mine in ran_envs.items():
        reps = [r for r in mine if r.variant in repro and r.outcome is not Outcome.NOT_RUN]
        if any(r.outcome is Outcome.REPRODUCED for r in reps):
            affected.add(value[env])
        elif reps and all(r.outcome is Outcome.PASS for r in reps):
            clean.add(value[env])
        cells: dict[str, list[Badge]] = {h: [] for h in drawn_hw}
        for r in sorted(mine, key=lambda r: (r.variant not in repro, r.variant)):
            if r.hardware_target in cells:
                cells[r.hardware_target].append(Badge(
                    variant=r.variant, outcome=r.outcome, reason=r.reason,
                    log=links.get(r.cell_id, ""),
                    # records before format 2 kept the caveat among the details
                    caveat=r.caveat or str(r.details.get("caveat", ""))))
        rows.append(Row(environment=env, versions=versions[env],
                        label=label(versions[env], vary, env),
                        cells={h: tuple(b) for h, b in cells.items()}))
    rows.sort(key=lambda row: ([version_sort_key(row.versions.get(k, "")) for k in vary],
                               row.environment))
    table_broken = tuple((e, broken[e]) for e in by_env if e in broken)
    not_run_rows = len(by_env) - len(ran_envs) - len(table_broken)
    not_tested = tuple(sorted({r.hardware_target for r in results} - {
        r.hardware_target for r in results if r.outcome is not Outcome.NOT_RUN}))
    return FailureTable(
        case=case, failure=plain(str(meta.get("failure") or meta.get("title") or case)),
        title=plain(str(meta.get("title") or "")), upstream=tuple(meta.get("upstream") or ()),
        signatures=tuple(sorted({s["name"] for m in variants for s in m.get("signatures") or ()})),
        varying=vary, hardware=drawn_hw, rows=tuple(rows), not_run_rows=not_run_rows,
        not_tested=not_tested, unbuildable=table_broken, reproduces=bool(repro),
        affected=frozenset(affected), clean=frozenset(clean), bisected=tuple(bisected),
        workarounds=tuple(_workaround(variant, rs, value) for variant, rs in sorted(
            group((r for r in results if r.environment in ran_envs), lambda r: r.variant).items())
            if variant not in repro))


_ROLE = re.compile(r":[a-z]+:`([^`]+)`")  # :class:`Foo`, :func:`bar`
_RST_CODE = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """A docstring's line as the pages show it: reStructuredText's code and roles as markdown's."""
    return _RST_CODE.sub(r"`\1`", _ROLE.sub(r"`\1`", text))


def version_list(found: Iterable[str], tested: Iterable[str] | None = None, limit: int = 12) -> str:
    """``found`` in version order; three or more that follow one another in ``tested`` as a
    range (``2.0.0–2.13.7``), and past ``limit`` pieces the rest as a count."""
    picked = sorted(set(found), key=version_sort_key)
    if tested is None:
        return ", ".join(picked)
    order = {v: i for i, v in enumerate(sorted(set(tested) | set(picked),
                                               key=version_sort_key))}
    runs: list[list[str]] = []
    for version in picked:
        if runs and order[version] == order[runs[-1][-1]] + 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    pieces = [f"{r[0]}–{r[-1]}" if len(r) >= 3 else ", ".join(r) for r in runs]
    if len(pieces) <= limit:
        return ", ".join(pieces)
    rest = sum(len(r) for r in runs[limit:])
    return ", ".join(pieces[:limit]) + f" and {rest} more (the table lists them)"


def _workaround(variant: str, results: Sequence[CellResult], value: Mapping[str, str]
                ) -> Workaround:
    """Whether a workaround helps, by the versions of the table's rows (``value``)."""
    ran = [r for r in results if r.outcome not in (*UNRUN, Outcome.SKIP)]
    return Workaround(
        variant=variant, works=frozenset(value[r.environment] for r in ran if r.outcome.passed),
        fails=frozenset(value[r.environment] for r in ran if not r.outcome.passed),
        why="" if ran else next((r.reason for r in results if r.outcome is Outcome.SKIP), ""),
        caveat=next((r.caveat for r in ran if r.caveat), ""))


#: How a probe's outcome reads in the grid (the rest say nothing of the capability).
GRID_KIND = {Outcome.PASS: "works", Outcome.REPRODUCED: "missing", Outcome.FAIL: "failed",
             Outcome.ERROR: "failed", Outcome.CRASH: "failed", Outcome.TIMEOUT: "failed",
             Outcome.FLAKY: "failed"}


def probe_packages(cases: Mapping[str, Mapping[str, Any]], variant: str) -> tuple[str, ...]:
    """The packages a probe is about (``@requires(packages=...)``), torch first; else torch."""
    named = dict.fromkeys(name for req in (cases.get(f"{PROBES}::{variant}") or {}).get(
        "requires") or () for name in req.get("packages") or {})
    return tuple(sorted(named, key=lambda n: n != "torch")) or ("torch",)


def _grid(results: Sequence[CellResult], versions: Mapping[str, dict[str, str]],
          cases: Mapping[str, Mapping[str, Any]], bisected: Sequence[str] = ()) -> Grid:
    hardware = tuple(sorted({r.hardware_target for r in results
                             if r.outcome is not Outcome.NOT_RUN}))
    groups = group(results, lambda r: (r.variant, r.hardware_target))
    rows = []
    for variant in sorted({r.variant for r in results}):
        packages = probe_packages(cases, variant)
        cells = {}
        for h in hardware:
            mine = groups.get((variant, h), [])
            kinds: dict[str, set[tuple[str, ...]]] = defaultdict(set)
            for r in mine:  # each grid word's version combinations of ``packages``
                if r.outcome in GRID_KIND:
                    kinds[GRID_KIND[r.outcome]].add(
                        tuple(versions[r.environment].get(p, "—") for p in packages))
            why = next((r.reason for r in mine if r.outcome in (Outcome.SKIP, Outcome.FAIL,
                                                                  Outcome.ERROR)), "")
            cells[h] = GridCell(works=combinations(kinds["works"], packages),
                                missing=combinations(kinds["missing"], packages),
                                failed=combinations(kinds["failed"], packages),
                                untested=sum(r.outcome not in GRID_KIND for r in mine),
                                reason=why, packages=len(packages))
        rows.append((variant, " × ".join(packages), cells))
    return Grid(hardware=hardware, rows=tuple(rows), bisected=tuple(bisected))

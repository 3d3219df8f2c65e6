"""Parse and validate matrix.yaml once, into frozen dataclasses. No other module sees raw dicts."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness.core import backends
from harness.core.defaults import cell_limit
from harness.core.errors import SpecError, UsageError
from harness.core.matrix import (
    OPERATORS,
    BuildSetting,
    EnvSpec,
    MatrixSpec,
    SuiteSpec,
    is_pin,
    requirement_for,
    requirement_name,
    short_value,
)
from harness.core.releases import PICKS, ReleaseQuery, Resolution, parsed
from harness.core.results import Outcome
from harness.core.rules import Rule
from harness.matrix import census
from harness.matrix.census import CaseCount, Count, count_combos, expand, refuse_past
from harness.matrix.overrides import apply_sets
from harness.matrix.reader import KeyPath, Source, kind, load_source, value_limit
from harness.matrix.releases import Releases, query_at

_HARDWARE = re.compile(r"^(cpu|auto|sm_\d{2,3}[a-z]?)$")
#: What a matrix combination, include or named environment may set besides package pins, and
#: how each value is checked.
SETTINGS: dict[str, Callable[[Source, KeyPath, Any], Any]] = {
    "backend": Source.backend, "packages": Source.packages, "env": Source.env,
    "timeout": Source.timeout, "cases": Source.cases, "network": Source.boolean,
    "cuda": Source.string, "image": Source.string, "base": Source.string,
    "index": lambda src, at, v: src.each(at, v, _index, "{} is not a package index: an http(s) "
                                         "or file URL, or a folder that exists"),
    "suites": Source.strings,
    "python": lambda src, at, v: src.matching(at, v, r"\d{1,2}\.\d{1,3}(\.\d{1,3})?",
                                              "a Python version like '3.11'"),
    "memory": lambda src, at, v: src.matching(at, v, r"\d+[kmg]?",
                                              "a memory size like '16g' or '512m'"),
    "retries": lambda src, at, v: src.number(at, v, lambda n: 0 <= n <= 10,
                                             "a number of retries from 0 to 10"),
    "hardware": lambda src, at, v: src.each(at, v, _HARDWARE.match, "{} is not a hardware target; "
                                            "use cpu, auto or a GPU architecture like sm_90"),
}
def _index(text: str) -> bool:
    """What uv takes for ``--index``: a URL, or a folder laid out as a simple index."""
    return text.startswith(("http://", "https://", "file://")) or Path(text).is_dir()


#: Settings that identify a combination (and so can be axes); the rest only configure it.
_COMBO_SETTINGS = ("backend", "python", "cuda", "index", "image")
#: Settings that say how many cells an environment has.
_CELL_SETTINGS = ("hardware", "cases", "suites")
XDIST_REQUIREMENT = "pytest-xdist>=3"  # a suite's ``workers:`` (-n); 3.0 has the hooks used
_TOP = {"version", "cases_dir", "defaults", "distributions", "build", "matrices",
        "environments", "runners", "expect", "suites"}


def load_matrix(path: str | Path, *, max_cells: int | None = None,
                releases: Releases | None = None,
                overrides: tuple[tuple[str, str], ...] = (),
                count_cases: CaseCount | None = None) -> MatrixSpec:
    """``path``'s matrix; ``releases`` answers its queries (default: the lock, saved, then the
    index)."""
    path = Path(path)
    lock = Releases.for_matrix(path) if releases is None else None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SpecError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}",
                        file=str(path), line=line) from None
    spec = parse_matrix(text, file=str(path), base=path.parent, max_cells=max_cells,
                        releases=lock or releases, overrides=overrides, count_cases=count_cases)
    if lock is not None and not overrides:  # a bump leaves the lock as it is
        lock.save()
    return spec


def parse_matrix(text: str, *, file: str, base: Path, max_cells: int | None = None,
                 releases: Releases | None = None,
                 overrides: tuple[tuple[str, str], ...] = (),
                 count_cases: CaseCount | None = None) -> MatrixSpec:
    """The matrix in ``text``, refused past ``max_cells`` before any environment is made;
    ``overrides``: ``--set`` pairs; ``count_cases``: how many cases selectors pick."""
    try:
        limit = cell_limit(max_cells)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    src = load_source(text, file, max_values=value_limit(limit))
    set_notes = apply_sets(src.data, overrides)
    top = Reader(src, limit, releases)
    root = src.mapping((), _TOP)
    version = root.get("version", 1)
    if isinstance(version, bool) or version != 1:  # True == 1 in Python
        raise src.error(("version",), f"unsupported version {version!r}; this harness reads 1")
    top.distributions = {k: src.distribution(("distributions", k), v)
                         for k, v in src.mapping(("distributions",), None, optional=True).items()}
    defaults = {"backend": backends.DEFAULT, "python": "3.11", **top.settings(
        ("defaults",), src.mapping(("defaults",), set(SETTINGS), optional=True))}
    top.builds = tuple(top.build(("build", name), str(name))
                       for name in src.mapping(("build",), None, optional=True))
    cases_dir = base / src.string(("cases_dir",), root.get("cases_dir", "cases"))
    if count_cases is not None:
        top.pick = functools.partial(count_cases, cases_dir)
    body_line = src.line(("matrices",) if "matrices" in root else ("environments",)) or 1
    # Counted first; from the axes' lengths alone where they are the count.
    names = list(src.mapping(("environments",), None, optional=True))
    matrices = list(src.mapping(("matrices",), None, optional=True))
    named_cells = sum((top.cells_of(("environments", n), {"pins", *SETTINGS}, defaults)
                       for n in names), Count(0))
    plain = [top.plain_cells(("matrices", name), defaults) for name in matrices]
    if None not in plain:
        refuse_past(sum((c for c in plain if c is not None), named_cells), limit, file,
                     body_line)
    entries = [top.entry(("matrices", name), str(name), defaults) for name in matrices]
    refuse_past(sum((cells for cells, _ in entries), named_cells), limit, file, body_line)
    envs = [env for _, environments in entries for env in environments()]
    envs += [top.named_env(("environments", name), str(name), defaults) for name in names]
    if not envs and matrices:
        raise src.error(("matrices",), "exclude: leaves no combination of the axes")
    if not envs:
        raise SpecError("empty: a matrix names its environments under matrices: or "
                        "environments:" if src.data is None else "no environments: name them "
                        "under matrices: or environments:", file=str(file),
                        line=body_line if {"matrices", "environments"} & set(root) else None)
    suites = tuple(top.suite(("suites", name), str(name), base)
                   for name in src.mapping(("suites",), None, optional=True))
    _check_environments(src, envs, tuple(s.name for s in suites))
    # A suite with xdist workers needs pytest-xdist where a backend installs.
    wide = {s.name for s in suites if s.workers > 1}
    envs = [replace(env, requirements=(*env.requirements, XDIST_REQUIREMENT))
            if wide & set(env.suites) and backends.REGISTRY[env.backend].installs
            and "pytest-xdist" not in {requirement_name(r) for r in env.requirements}
            else env for env in envs]
    runners = {str(hw): src.strings(("runners", hw), labels)
               for hw, labels in src.mapping(("runners",), None, optional=True).items()}
    for hw, labels in runners.items():
        if not labels:  # GitHub refuses a job with no runs-on label only when it starts
            raise src.error(("runners", hw), "an empty list of runner labels; name at least one")
    # Under --set, a rule about environments the bump replaced holds for none: not a mistake.
    expect = top.expectations(("expect",), {env.name for env in envs}, strict=not overrides)
    return MatrixSpec(file=file, cases_dir=cases_dir, environments=tuple(envs), max_cells=limit,
                      runners=runners, expect=expect, suites=suites,
                      resolutions=tuple(top.resolutions.values()), sets=overrides,
                      set_notes=tuple(set_notes), distributions=top.distributions,
                      cases_dir_line=src.line(("cases_dir",)), body_line=body_line)


def _check_environments(src: Source, envs: list[EnvSpec], suites: tuple[str, ...]) -> None:
    """Refuse an unknown suite, a base on a backend without overlays, a name used twice."""
    seen: dict[str, EnvSpec] = {}
    for env in envs:
        where = tuple(env.origin.split(".", 1))
        for name in env.suites:
            if name not in suites:
                raise src.error((*where, "suites"), f"no suite named {name!r}; suites: "
                                + (", ".join(suites) or "none (add suites:)"))
        if env.base and not backends.REGISTRY[env.backend].overlays:
            takers = " or ".join(n for n, b in backends.REGISTRY.items() if b.overlays)
            raise src.error(where, f"base (an overlay on an interpreter) needs backend {takers}, "
                            f"not {env.backend}")
        if env.name in seen:
            raise src.error(where, f"two environments are named {env.name!r} (the other is "
                            f"{seen[env.name].origin})")
        seen[env.name] = env


class Reader:
    """The matrix read from its checked document: its sections (suites, build, expect), entries,
    axes, release queries and environments."""

    def __init__(self, src: Source, max_cells: int, releases: Releases | None = None) -> None:
        self.src = src
        self.max_cells = max_cells
        self.releases = releases
        self.resolutions: dict[tuple[str, str], Resolution] = {}
        self.distributions: dict[str, str] = {}  # axis -> distribution (``distributions:``)
        self.builds: tuple[BuildSetting, ...] = ()
        # How many cases some selectors pick (parse_matrix's count_cases, at cases_dir).
        self.pick: census.CasePick | None = None

    def settings(self, path: KeyPath, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The setting keys of ``raw`` (found at ``path``), checked into typed values."""
        return {key: SETTINGS[key](self.src, (*path, key), value) for key, value in raw.items()
                if key in SETTINGS}

    def suite(self, path: KeyPath, name: str, base: Path) -> SuiteSpec:
        """One entry of ``suites:``: where the tests are (``path:`` or ``pyargs:``), which
        packages are under test, and what pytest gets."""
        raw = self.src.mapping(path, {"path", "pyargs", "package", "args", "env", "timeout",
                                      "workers"})
        if ("path" in raw) == ("pyargs" in raw):
            raise self.src.error(path, "a suite needs exactly one of path: (a folder of tests) "
                                 "and pyargs: (an installed package's tests, like mylib.tests)")
        folder = pyargs = None
        if "path" in raw:
            folder = str((base / self.src.string((*path, "path"), raw["path"])).resolve())
            if not Path(folder).exists():
                raise self.src.error((*path, "path"), f"{folder}: no such file or folder")
        else:
            pyargs = self.src.matching((*path, "pyargs"), raw["pyargs"],
                                       r"[A-Za-z_][\w.]*(::\S+)?", "a package like 'mylib.tests'")
        packages = self.src.each((*path, "package"), raw.get("package", []),
                                 re.compile(r"[A-Za-z_][\w.]*").fullmatch,
                                 "{} is not an import name like 'mylib'")
        if not packages and pyargs:
            packages = (pyargs.split(".", 1)[0].split("::", 1)[0],)
        return SuiteSpec(
            name=name, path=folder, pyargs=pyargs, packages=packages,
            args=self.src.strings((*path, "args"), raw.get("args", [])),
            env=self.src.env((*path, "env"), raw["env"]) if "env" in raw else (),
            timeout=self.src.timeout((*path, "timeout"), raw["timeout"]) if "timeout" in raw
            else None,
            workers=self.src.number((*path, "workers"), raw.get("workers", 1),
                                    lambda v: 1 <= v <= 256, shown=repr,
                                    what="a number of pytest-xdist workers from 1 to 256"),
            where=f"{self.src.file}:{self.src.line(path)}")

    def build(self, path: KeyPath, dist: str) -> BuildSetting:
        raw = self.src.mapping(path, {"via", "isolation", "requires", "env", "nvcc"})
        nvcc = raw.get("nvcc")
        if nvcc is not None:
            nvcc = self.src.specifier((*path, "nvcc"), nvcc, ">=12.0")
        return BuildSetting(
            dist=canonicalize_name(dist),
            via=tuple(canonicalize_name(v)
                      for v in self.src.strings((*path, "via"), raw.get("via", []))),
            isolation=self.src.boolean((*path, "isolation"), raw.get("isolation", True)),
            requires=self.src.packages((*path, "requires"), raw.get("requires", [])),
            env=self.src.env((*path, "env"), raw["env"]) if "env" in raw else (), nvcc=nvcc)

    def expectations(self, path: KeyPath, names: set[str], *, strict: bool = True
                     ) -> tuple[Rule, ...]:
        """``expect:``; not ``strict`` (under --set), a rule that matches no environment is
        left out rather than refused."""
        raw = self.src.at(path)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.src.error(path, f"expected a list of rules, got {kind(raw)}")
        rules = (self.rule((*path, i), names if strict else None) for i in range(len(raw)))
        return tuple(rule for rule in rules
                     if strict or any(fnmatchcase(n, rule.environment) for n in names))

    def rule(self, path: KeyPath, names: set[str] | None) -> Rule:
        raw = self.src.mapping(path, {"environment", "case", "hardware", "outcome", "reason",
                                      "why"})
        for key in ("outcome", "why"):
            if key not in raw:
                raise self.src.error(path, f"a rule needs {key!r} (what is expected, and why)")
        globs = {k: self.src.string((*path, k), raw[k]) for k in ("environment", "case", "hardware")
                 if k in raw}
        env_glob = globs.get("environment", "*")
        if names is not None and not any(fnmatchcase(n, env_glob) for n in names):
            raise self.src.error((*path, "environment"),
                                 f"{env_glob!r} matches no environment of this matrix")
        expected = [o for o in Outcome.__members__ if o != "NOT_RUN"]
        outcomes = self.src.each((*path, "outcome"), raw["outcome"], expected.__contains__,
                                 "{} is not an outcome a cell can be expected to have; expected "
                                 "one of: " + ", ".join(expected))
        reason = None
        if "reason" in raw:
            reason = self.src.string((*path, "reason"), raw["reason"])
            try:
                re.compile(reason)
            except re.error as exc:
                raise self.src.error((*path, "reason"),
                                     f"not a regular expression: {exc}") from None
        why = self.src.checked((*path, "why"), raw["why"], str.strip, "say why this is expected")
        return Rule(outcomes=frozenset(map(Outcome, outcomes)), why=why.strip(), reason=reason,
                    where=f"{self.src.file}:{self.src.line(path)}", **globs)

    def plain_cells(self, path: KeyPath, defaults: dict[str, Any]) -> Count | None:
        """A matrix entry's cells from its axes' lengths; None where that is not its count."""
        raw = self.src.at(path)
        axes = raw.get("axes") if isinstance(raw, dict) else None
        if (not isinstance(axes, dict) or not axes or "exclude" in raw or "include" in raw
                or not all(isinstance(v, list) and v for v in axes.values())
                or any(query_at(str(a), v) is not None for a, v in axes.items())):
            return None
        envs = Count(math.prod(len(values) for values in axes.values()))
        self._refuse_envs(path, envs)
        return envs * self.cells_of(path, {"axes", "variables", *SETTINGS}, defaults)

    def _refuse_envs(self, path: KeyPath, envs: Count) -> None:
        if envs.n > self.max_cells:
            raise self.src.error((*path, "axes"), f"the axes cross into {envs} environments, "
                                 f"over the limit of {self.max_cells:,} cells (--max-cells)")

    def cells_of(self, path: KeyPath, allowed: set[str], defaults: dict[str, Any]) -> Count:
        """An environment's cells (of a matrix entry: each's), from its targets, cases and
        suites alone."""
        raw = self.src.mapping(path, allowed)
        cell_settings = {k: raw[k] for k in _CELL_SETTINGS if k in raw}
        return census.cells_per_env({**defaults, **self.settings(path, cell_settings)}, self.pick)

    def entry(self, path: KeyPath, name: str, defaults: dict[str, Any]
              ) -> tuple[Count, Callable[[], list[EnvSpec]]]:
        """One entry of ``matrices:``, checked and counted (refused past the limit): its cells
        (at least, unless the cases were counted), and what makes its environments."""
        raw = self.src.mapping(path, {"axes", "exclude", "include", "variables", *SETTINGS})
        settings = {**defaults, **self.settings(path, raw)}
        raw_axes = self.src.mapping((*path, "axes"), None)
        if not raw_axes:
            raise self.src.error((*path, "axes"), "a matrix needs at least one axis")
        # An axis is a query, or a list whose one query item adds releases to its values.
        at = {axis: query_at(axis, values) for axis, values in raw_axes.items()}
        queries = {axis: self._query((*path, "axes", axis, *where), str(axis))
                   for axis in raw_axes if (where := at[axis]) is not None}
        for axis, values in raw_axes.items():
            if axis not in queries and (not isinstance(values, list) or not values):
                raise self.src.error((*path, "axes", axis), "an axis is a non-empty list or "
                                     f"a release query (releases: ...), got {kind(values)}")
        listed = {a: [x for i, x in enumerate(v) if (i,) != at[a]]
                  for a, v in raw_axes.items() if not isinstance(v, dict)}
        pinned = {k for _, when in queries.values() for pins in when for k in pins[1]}
        variables = self._variables(path, raw, listed) - pinned - set(queries)
        axes: dict[str, list[dict[str, Any]]] = {
            axis: [] if isinstance(values, dict) else self._axis(
                (*path, "axes", axis), axis, values, variables, skip=at[axis])
            for axis, values in raw_axes.items()}
        axis_keys = ({k for values in axes.values() for value in values for k in value}
                     | set(queries) | pinned)
        exclude = self._patterns((*path, "exclude"), axis_keys, variables)
        # GitHub Actions' include may add keys of its own: a pin, a setting or a variable.
        include = self._patterns((*path, "include"), None, variables)
        # A query counts as one value here; the whole plan is counted again once resolved.
        envs = count_combos({a: [] if a in queries else v for a, v in axes.items()}, exclude,
                            include, unknown=set(queries) | pinned)
        self._refuse_envs(path, envs)
        shown = axis_keys | {k for entry in include for k in entry if k not in SETTINGS}
        # Keys that follow a linked axis (transformers beside torch) stay out of env names.
        followers = {k for axis, values in axes.items() for value in values for k in value
                     if axis in value and k != axis} | pinned
        follow = {axis: self._follower((*path, "axes", axis), axis, query, when, settings,
                                       axes[axis])
                  for axis, (query, when) in queries.items()}

        def environments() -> list[EnvSpec]:
            return [self._env_spec(combo, settings, name=name, origin=f"matrices.{name}",
                                   axis_keys=shown, hidden=followers, variables=variables)
                    for combo in expand(axes, exclude, include, follow=follow)]
        return envs * census.cells_per_env(settings, self.pick), environments

    def _query(self, path: KeyPath, axis: str
               ) -> tuple[ReleaseQuery, list[tuple[SpecifierSet, dict[str, Any]]]]:
        """An axis that follows the index: ``{releases: ">=2.0,<3", pick, latest, pre, yanked,
        sdist, when: {"<2.5": {pins}}}``."""
        raw = self.src.mapping(path, {"releases", "pick", "latest", "pre", "yanked", "sdist",
                                      "when"})
        if axis in SETTINGS:
            raise self.src.error(path, f"{axis!r} is a setting; a release query is a "
                                 "package's axis")
        releases = self.src.specifier((*path, "releases"), raw.get("releases", ""), ">=2.0,<3")
        pick = self.src.checked((*path, "pick"), raw.get("pick", "latest-patch"),
                                PICKS.__contains__, "unknown pick {}; expected one of: "
                                + ", ".join(PICKS))
        latest = raw.get("latest")
        if latest is not None:
            self.src.number((*path, "latest"), latest, lambda n: n >= 1,
                            "a number of minor series (1 or more)")
        flags = {k: self.src.boolean((*path, k), raw[k]) for k in ("pre", "yanked", "sdist")
                 if k in raw}
        when = []
        for spec_text in self.src.mapping((*path, "when"), None, optional=True):
            self.src.specifier((*path, "when", spec_text), spec_text, "<2.5")
            table = self.src.mapping((*path, "when", spec_text), None)
            for key in table:
                if key == axis or key in SETTINGS:
                    raise self.src.error((*path, "when", spec_text, key), f"a when: table "
                                         f"pins other packages, not {key!r}")
            when.append((SpecifierSet(spec_text), {
                k: self._value((*path, "when", spec_text, k), k, v) for k, v in table.items()}))
        dist = requirement_name(self.distributions.get(axis, axis))
        return ReleaseQuery(dist=dist, releases=releases, pick=pick, latest=latest,
                            **flags), when

    def _follower(self, path: KeyPath, axis: str, query: ReleaseQuery,
                  when: list[tuple[SpecifierSet, dict[str, Any]]], settings: dict[str, Any],
                  listed: list[dict[str, Any]]) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
        """A query axis's values beside one combination: ``listed``, then the releases for its
        Python and indexes, each with its when: pins."""
        def values(combo: dict[str, Any]) -> list[dict[str, Any]]:
            python = str(combo.get("python", settings["python"]))
            indexes = tuple(combo.get("index", settings.get("index", ())))
            if self.releases is None:
                raise self.src.error(path, "a release query needs the index or the lock: "
                                     "load the matrix from its file")
            found = self.releases.resolve(query, python, indexes)
            self.resolutions[(query.text, found.target.key)] = found
            if not found.versions:
                raise self.src.error(path, f"{query.text} matches no release for Python "
                                     f"{python}" + "".join(f"; {v}: {why}"
                                                           for v, why in found.left_out[:3]))
            out = list(listed)
            for version in (v for v in found.versions if v not in {r.get(axis) for r in listed}):
                pins = next((p for spec, p in when if spec.contains(version, prereleases=True)),
                            {})
                out.append({axis: version, **pins})
            return out
        return values

    def _variables(self, path: KeyPath, raw: Mapping[str, Any], raw_axes: Mapping[str, Any]
                   ) -> set[str]:
        """Keys that are cell settings, not packages (passed as environment variables): listed
        in ``variables:``, in capitals, or with no value that reads as a version."""
        declared = set(self.src.strings((*path, "variables"), raw.get("variables", [])))
        rows = [value if isinstance(value, dict) else {axis: value}
                for axis, values in raw_axes.items() for value in values]
        include = raw.get("include")  # not a list: _patterns says so, at its line
        rows += [e for e in include if isinstance(e, dict)] if isinstance(include, list) else []
        seen: dict[str, list[Any]] = {}
        for row in rows:
            for key, item in row.items():
                seen.setdefault(str(key), []).append(item)
        out = set(declared)
        for key, items in seen.items():
            # A list or mapping is malformed (_value says so, at its line); a value that reads
            # as a version makes a package, whose typos and numbers are then errors.
            package = any(isinstance(v, list | dict)
                          or (isinstance(v, str) and _version_like(key, v)) for v in items)
            # TORCH_CUDA_ARCH_LIST: in capitals, as environment variables are named
            if key not in SETTINGS and key not in self.distributions and (
                    key.isupper() or not package):
                out.add(key)
        return out

    def _axis(self, path: KeyPath, axis: str, values: Any, variables: set[str],
              skip: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
        out = []
        for i, value in enumerate(values):
            if (i,) == skip:  # the axis's query item: _follower adds what it resolves to
                continue
            if isinstance(value, dict):  # a linked axis: these keys move together
                linked = self.src.mapping((*path, i), None)
                out.append({k: self._value((*path, i, k), k, v, variables)
                            for k, v in linked.items()})
            else:
                out.append({axis: self._value((*path, i), axis, value, variables)})
        return out

    def _value(self, path: KeyPath, key: str, value: Any,
               variables: set[str] | frozenset[str] = frozenset()) -> Any:
        if key in SETTINGS:
            if key not in _COMBO_SETTINGS:
                raise self.src.error(path, f"{key!r} cannot vary along an axis")
            return SETTINGS[key](self.src, path, value)
        if value is None:
            return None  # null: this package is left out (this variable is not set)
        if key in variables:
            if isinstance(value, list | dict):
                raise self.src.error(path, f"a variable is one value, got {kind(value)}")
            return self.src.printable(path, str(value).lower() if isinstance(value, bool)
                                      else str(value))
        return self.src.checked(path, value, functools.partial(is_pin, key),
                                "{} is not a version or specifier",
                                what="a version, a specifier or null")

    def _patterns(self, path: KeyPath, known: set[str] | None, variables: set[str]
                  ) -> list[dict[str, Any]]:
        """``exclude:`` or ``include:`` (at ``path``); ``known``: the keys it may name."""
        raw, what = self.src.at(path), path[-1]
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.src.error(path, f"{what} is a list of mappings, got {kind(raw)}")
        out = []
        for i in range(len(raw)):
            entry = self.src.mapping((*path, i), None)
            for key in entry:
                if known is not None and key not in known:
                    raise self.src.error((*path, i, key), f"{what} names unknown axis {key!r}; "
                                         "axes here: " + ", ".join(sorted(known)))
            out.append({k: self._value((*path, i, k), k, v, variables)
                        for k, v in entry.items()})
        return out

    def named_env(self, path: KeyPath, name: str, defaults: dict[str, Any]) -> EnvSpec:
        raw = self.src.mapping(path, {"pins", *SETTINGS})
        pins = self.src.mapping((*path, "pins"), None, optional=True)
        setting = next((key for key in pins if key in SETTINGS), None)
        if setting is not None:
            raise self.src.error((*path, "pins", setting), f"{setting!r} is a setting, not a pin")
        combo = {k: self._value((*path, "pins", k), k, v) for k, v in pins.items()}
        settings = {**defaults, **self.settings(path, raw)}
        return self._env_spec(combo, settings, name=name, origin=f"environments.{name}",
                              axis_keys=set(combo), named=True)

    def _env_spec(self, combo: dict[str, Any], settings: dict[str, Any], *, name: str,
                  origin: str, axis_keys: set[str] | frozenset[str], named: bool = False,
                  hidden: frozenset[str] | set[str] = frozenset(),
                  variables: set[str] | frozenset[str] = frozenset()) -> EnvSpec:
        merged = {**settings, **{k: v for k, v in combo.items() if k in SETTINGS}}
        pins = [(self.distributions.get(k, k), str(v)) for k, v in combo.items()
                if k not in SETTINGS and k not in variables and v is not None]
        chosen = {k: str(v) for k, v in combo.items() if k in variables and v is not None}
        env_vars = list(merged.get("env", ()))
        if chosen:  # each in capitals (init_device: INIT_DEVICE), and all together as JSON
            env_vars += [(re.sub(r"\W", "_", k).upper(), v) for k, v in chosen.items()]
            env_vars.append(("HARNESS_VARIABLES", json.dumps(chosen, sort_keys=True)))
        requirements = [requirement_for(d, v) for d, v in pins]
        requirements += list(merged.get("packages", ()))
        names = {requirement_name(r) for r in requirements}
        values = [(k, _shown(v)) for k, v in combo.items()
                  if k in axis_keys or k in _COMBO_SETTINGS]
        label = name if named else f"{name}:" + ",".join(
            f"{k}{v}" if v.startswith(OPERATORS) else f"{k}={v}"
            for k, v in values if k not in hidden)
        # The other settings are EnvSpec's fields of the same names.
        same = {k: v for k, v in merged.items() if k not in ("packages", "index", "env")}
        return EnvSpec(name=label, origin=origin, values=tuple(values),
                       requirements=tuple(requirements), pins=tuple(pins),
                       index_urls=tuple(merged.get("index", ())), env_vars=tuple(env_vars),
                       builds=tuple(b for b in self.builds if b.applies_to(names)), **same)


def _version_like(key: str, text: str) -> bool:
    """Whether ``text`` reads as a pin of ``key``: a version, a specifier, ``*`` or a URL."""
    text = text.strip()
    return text == "*" or "://" in text or (is_pin(key, text) and (
        text.startswith(OPERATORS) or parsed(text) is not None))


def _shown(value: Any) -> str:
    """An axis value as names and tables show it: a list (``index``) item by item."""
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ",".join(short_value(str(v)) for v in value)
    return short_value(str(value))


"""Typed access to a parsed matrix.yaml: every value checked, every failure a one-line
SpecError at its line. ``harness.matrix.load`` reads the matrix's structure with it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.core import backends
from harness.core.matrix import BuildSetting, CaseSelector, SuiteSpec
from harness.core.results import Outcome
from harness.core.rules import Rule
from harness.matrix.releases import valid_specifier
from harness.matrix.yamlsrc import KeyPath, Source, format_path

MAX_TIMEOUT = 7 * 24 * 3600  # a week: a longer timeout is a typo
_HARDWARE = re.compile(r"^(cpu|auto|sm_\d{2,3}[a-z]?)$")


class Reader:
    def __init__(self, src: Source) -> None:
        self.src = src

    def at(self, path: KeyPath) -> Any:
        node = self.src.data
        for part in path:
            in_dict = isinstance(node, dict) and part in node
            in_list = isinstance(node, list) and isinstance(part, int) and part < len(node)
            if not (in_dict or in_list):
                return None
            node = node[part]
        return node

    def mapping(self, path: KeyPath, allowed: set[str] | None, *, optional: bool = False
                ) -> dict[str, Any]:
        value = self.at(path)
        if value is None and (optional or not path):
            return {}
        if not isinstance(value, dict):
            raise self.src.error(path, f"expected a mapping, got {kind(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.src.error((*path, key), f"keys must be strings, got {kind(key)}")
            if allowed is not None and key not in allowed:
                raise self.src.error((*path, key), f"unknown key {key!r}; expected one of: "
                                     + ", ".join(sorted(allowed)))
        return value

    def string(self, path: KeyPath, value: Any, *, what: str = "a string") -> str:
        if isinstance(value, bool) or value is None or isinstance(value, list | dict):
            raise self.src.error(path, f"expected {what}, got {kind(value)}")
        if isinstance(value, int | float):
            shown = repr(value) if len(repr(value)) <= 20 else kind(value)
            raise self.src.error(path, f"{shown} is a number; quote it ('{shown}') so that "
                                 "YAML keeps it exactly as written")
        return self.printable(path, str(value))

    def printable(self, path: KeyPath, text: str) -> str:
        if any(not c.isprintable() for c in text):
            raise self.src.error(path, f"{text!r} holds a control character")
        return text

    def strings(self, path: KeyPath, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            raise self.src.error(path, f"expected a list of strings, got {kind(value)}")
        return tuple(self.string((*path, i), v) for i, v in enumerate(value))

    def each(self, path: KeyPath, value: Any, ok: Callable[[str], object], why: str
             ) -> tuple[str, ...]:
        """``strings``, each of which must be ``ok``; else ``why`` (with ``{}`` its text) at
        its own line."""
        items = self.strings(path, value)
        for i, item in enumerate(items):
            if not ok(item):
                raise self.src.error(path if isinstance(value, str) else (*path, i),
                                     why.format(repr(item)))
        return items

    def number(self, path: KeyPath, value: Any, ok: Callable[[Any], bool], what: str, *,
               floats: bool = False, shown: Callable[[Any], str] | None = None) -> Any:
        types = int | float if floats else int
        if isinstance(value, bool) or not isinstance(value, types) or not ok(value):
            raise self.src.error(path, f"expected {what}, got {(shown or kind)(value)}")
        return value

    def boolean(self, path: KeyPath, value: Any) -> bool:
        if not isinstance(value, bool):
            raise self.src.error(path, f"expected true or false, got {kind(value)}")
        return value

    def matching(self, path: KeyPath, value: Any, pattern: str, what: str) -> str:
        text = self.string(path, value)
        if not re.fullmatch(pattern, text):
            raise self.src.error(path, f"{text!r} is not {what}")
        return text

    def settings(self, path: KeyPath, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The setting keys of ``raw`` (found at ``path``), checked into typed values."""
        checks: dict[str, Callable[[KeyPath, Any], Any]] = {
            "backend": self.backend, "python": self.python, "cuda": self.string,
            "image": self.string, "packages": self.packages, "index": self.strings,
            "env": self.env, "timeout": self.timeout, "network": self.boolean,
            "hardware": self.hardware, "cases": self.cases, "memory": self.memory,
            "retries": self.retries, "suites": self.strings, "base": self.string,
        }
        return {key: checks[key]((*path, key), value) for key, value in raw.items()
                if key in checks}

    def specifier(self, path: KeyPath, value: Any, like: str) -> str:
        text = self.string(path, value, what=f"a version specifier like {like!r}")
        if not valid_specifier(text):
            raise self.src.error(path, f"{text!r} is not a version specifier like {like!r}")
        return text

    def backend(self, path: KeyPath, value: Any) -> str:
        name = self.string(path, value)
        if name not in backends.REGISTRY:
            raise self.src.error(path, f"unknown backend {name!r}; valid: "
                                 + ", ".join(backends.backend_names()))
        return name

    def python(self, path: KeyPath, value: Any) -> str:
        return self.matching(path, value, r"\d{1,2}\.\d{1,3}(\.\d{1,3})?",
                             "a Python version like '3.11'")

    def memory(self, path: KeyPath, value: Any) -> str:
        return self.matching(path, value, r"\d+[kmg]?", "a memory size like '16g' or '512m'")

    def packages(self, path: KeyPath, value: Any) -> tuple[str, ...]:
        lines = self.strings(path, value)
        for i, line in enumerate(lines):
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise self.src.error((*path, i), f"{line!r} is not a requirement: {exc}") from None
        return lines

    def env(self, path: KeyPath, value: Any) -> tuple[tuple[str, str], ...]:
        return tuple((k, self.string((*path, k), v)) for k, v in self.mapping(path, None).items())

    def timeout(self, path: KeyPath, value: Any) -> float:
        return float(self.number(path, value, lambda v: 0 < v <= MAX_TIMEOUT, floats=True,
                                 what=f"a positive number of seconds up to {MAX_TIMEOUT:,}"))

    def retries(self, path: KeyPath, value: Any) -> int:
        return int(self.number(path, value, lambda v: 0 <= v <= 10,
                               "a number of retries from 0 to 10"))

    def hardware(self, path: KeyPath, value: Any) -> tuple[str, ...]:
        return self.each(path, value, _HARDWARE.match, "{} is not a hardware target; use cpu, "
                         "auto or a GPU architecture like sm_90")

    def cases(self, path: KeyPath, value: Any) -> tuple[CaseSelector, ...]:
        return tuple(CaseSelector(pattern=p, where=f"{self.src.file}:{self.src.line((*path, i))}: "
                                  f"{format_path((*path, i))}")
                     for i, p in enumerate(self.strings(path, value)))

    def distribution(self, path: KeyPath, value: Any) -> str:
        """A distribution name, extras allowed (``transformer-engine[pytorch]``)."""
        text = self.string(path, value)
        try:
            requirement: Requirement | None = Requirement(text)
        except InvalidRequirement:
            requirement = None
        if requirement is None or requirement.specifier or requirement.url:
            raise self.src.error(path, f"{text!r} is not a distribution name like "
                                 "'transformer-engine[pytorch]'")
        return text

    def suite(self, path: KeyPath, name: str, base: Path) -> SuiteSpec:
        """One entry of ``suites:``: where the tests are (``path:`` or ``pyargs:``), which
        packages are under test, and what pytest gets."""
        raw = self.mapping(path, {"path", "pyargs", "package", "args", "env", "timeout",
                                  "workers"})
        if ("path" in raw) == ("pyargs" in raw):
            raise self.src.error(path, "a suite needs exactly one of path: (a folder of tests) "
                                 "and pyargs: (an installed package's tests, like mylib.tests)")
        folder = pyargs = None
        if "path" in raw:
            folder = str((base / self.string((*path, "path"), raw["path"])).resolve())
            if not Path(folder).exists():
                raise self.src.error((*path, "path"), f"{folder}: no such file or folder")
        else:
            pyargs = self.matching((*path, "pyargs"), raw["pyargs"],
                                   r"[A-Za-z_][\w.]*(::\S+)?", "a package like 'mylib.tests'")
        packages = self.each((*path, "package"), raw.get("package", []),
                             re.compile(r"[A-Za-z_][\w.]*").fullmatch,
                             "{} is not an import name like 'mylib'")
        if not packages and pyargs:
            packages = (pyargs.split(".", 1)[0].split("::", 1)[0],)
        return SuiteSpec(
            name=name, path=folder, pyargs=pyargs, packages=packages,
            args=self.strings((*path, "args"), raw.get("args", [])),
            env=self.env((*path, "env"), raw["env"]) if "env" in raw else (),
            timeout=self.timeout((*path, "timeout"), raw["timeout"]) if "timeout" in raw
            else None,
            workers=self.number((*path, "workers"), raw.get("workers", 1),
                                lambda v: 1 <= v <= 256, shown=repr,
                                what="a number of pytest-xdist workers from 1 to 256"),
            where=f"{self.src.file}:{self.src.line(path)}")

    def build(self, path: KeyPath, dist: str) -> BuildSetting:
        raw = self.mapping(path, {"via", "isolation", "requires", "env", "nvcc"})
        nvcc = raw.get("nvcc")
        if nvcc is not None:
            nvcc = self.specifier((*path, "nvcc"), nvcc, ">=12.0")
        return BuildSetting(
            dist=canonicalize_name(dist),
            via=tuple(canonicalize_name(v)
                      for v in self.strings((*path, "via"), raw.get("via", []))),
            isolation=self.boolean((*path, "isolation"), raw.get("isolation", True)),
            requires=self.packages((*path, "requires"), raw.get("requires", [])),
            env=self.env((*path, "env"), raw["env"]) if "env" in raw else (), nvcc=nvcc)

    def expectations(self, path: KeyPath, names: set[str], *, strict: bool = True
                     ) -> tuple[Rule, ...]:
        """``expect:``; not ``strict`` (under --set), a rule that matches no environment is
        left out rather than refused."""
        raw = self.at(path)
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise self.src.error(path, f"expected a list of rules, got {kind(raw)}")
        rules = (self.rule((*path, i), names if strict else None) for i in range(len(raw)))
        return tuple(rule for rule in rules
                     if strict or any(fnmatchcase(n, rule.environment) for n in names))

    def rule(self, path: KeyPath, names: set[str] | None) -> Rule:
        raw = self.mapping(path, {"environment", "case", "hardware", "outcome", "reason",
                                  "why"})
        for key in ("outcome", "why"):
            if key not in raw:
                raise self.src.error(path, f"a rule needs {key!r} (what is expected, and why)")
        globs = {k: self.string((*path, k), raw[k]) for k in ("environment", "case", "hardware")
                 if k in raw}
        env_glob = globs.get("environment", "*")
        if names is not None and not any(fnmatchcase(n, env_glob) for n in names):
            raise self.src.error((*path, "environment"),
                                 f"{env_glob!r} matches no environment of this matrix")
        expected = [o for o in Outcome.__members__ if o != "NOT_RUN"]
        outcomes = self.each((*path, "outcome"), raw["outcome"], expected.__contains__,
                             "{} is not an outcome a cell can be expected to have; expected "
                             "one of: " + ", ".join(expected))
        reason = None
        if "reason" in raw:
            reason = self.string((*path, "reason"), raw["reason"])
            try:
                re.compile(reason)
            except re.error as exc:
                raise self.src.error((*path, "reason"),
                                     f"not a regular expression: {exc}") from None
        why = self.string((*path, "why"), raw["why"]).strip()
        if not why:
            raise self.src.error((*path, "why"), "say why this is expected")
        return Rule(outcomes=frozenset(map(Outcome, outcomes)), why=why, reason=reason,
                    where=f"{self.src.file}:{self.src.line(path)}", **globs)


def kind(value: Any) -> str:
    """A value as a one-line message names it."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and abs(value) >= 10 ** 12:
        return f"a number of {len(str(abs(value)))} digits"
    if isinstance(value, int | float):
        return f"a number ({value})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "...'"

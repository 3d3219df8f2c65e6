"""Discover case variants by letting pytest collect cases/ with the in-env plugin, in the
harness's own interpreter (case modules import only pytest and harness_case at module level)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from harness.core import atomic
from harness.core.errors import UsageError, one_line
from harness.core.matrix import DEFAULT_TIMEOUT, CaseSelector, SuiteSpec
from harness.core.paths import INENV_DIR, default_cache_dir


@dataclass(frozen=True, kw_only=True)
class CaseVariant:
    case_id: str
    variant: str
    nodeid: str
    title: str = ""
    markers: tuple[str, ...] = ()
    needs_gpu: bool = False
    signatures: tuple[str, ...] = ()
    failure: str = ""  # the documented failure, one line
    upstream: tuple[str, ...] = ()  # links to the reports and fixes
    description: str = ""  # the module docstring: mechanism, versions read
    doc: str = ""  # the variant's own docstring
    requires: tuple[dict[str, Any], ...] = ()
    signature_specs: tuple[dict[str, str], ...] = ()  # name, exc_type, pattern
    caveats: tuple[str, ...] = ()
    isolate: bool = False  # needs a process of its own (global FP8 or CUDA state)
    retries: int = 0  # the case's own `Case(retries=N)`: a failed variant runs again
    about: tuple[str, ...] = ()  # `Case(about=...)`: the packages that decide the failure
    # A test suite's session (plan.suites): one cell, one result per test.
    suite: SuiteSpec | None = None

    @property
    def label(self) -> str:
        return f"{self.case_id}::{self.variant}"

    @property
    def path(self) -> str:
        return self.nodeid.split("::", 1)[0]

    def metadata(self) -> dict[str, Any]:
        """What a run record keeps of the variant, so a report needs no checkout of cases/."""
        return {"case": self.case_id, "variant": self.variant, "nodeid": self.nodeid,
                "title": self.title, "failure": self.failure, "upstream": list(self.upstream),
                "description": self.description, "doc": self.doc,
                "markers": list(self.markers), "needs_gpu": self.needs_gpu,
                "requires": list(self.requires), "signatures": list(self.signature_specs),
                "caveats": list(self.caveats), "isolate": self.isolate,
                "retries": self.retries, "about": list(self.about),
                **({"suite": self.suite.to_dict()} if self.suite else {})}


def pytest_args(cases_dir: Path) -> list[str]:
    return ["-p", "harness_case", "-c", str(cases_dir / "pytest.ini"),
            "--rootdir", str(cases_dir)]


def collect_cases(cases_dir: Path) -> tuple[CaseVariant, ...]:
    """The case variants under ``cases_dir``, cached by every file's size and mtime there."""
    if not (cases_dir / "pytest.ini").is_file():
        raise UsageError(f"{cases_dir}: not a cases directory (no pytest.ini)")
    cache = _collect_cache(cases_dir)
    if cache is not None and cache.is_file():
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return tuple(_variant(item) for item in json.loads(cache.read_text()))
    raw = _collect(cases_dir)
    if cache is not None:
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            atomic.write_text(cache, json.dumps(raw))
    return tuple(_variant(item) for item in raw)


def _collect_cache(cases_dir: Path) -> Path | None:
    try:
        files = sorted(p for p in [*cases_dir.rglob("*.py"), *cases_dir.glob("*.ini"),
                                   *INENV_DIR.glob("*.py")] if "__pycache__" not in p.parts)
        stamp = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    except OSError:
        return None
    from importlib.metadata import version

    blob = json.dumps([sys.version, version("pytest"), stamp]).encode()
    return default_cache_dir() / "collect" / f"{hashlib.sha256(blob).hexdigest()[:16]}.json"


#: pytest, ended after the seconds of its first argument (a case module that hangs at import),
#: faulthandler printing where each thread was, innermost frame first, on the stderr that
#: pytest's capture does not take.
_PYTEST = ("import faulthandler, os, sys, pytest; faulthandler.dump_traceback_later("
           "float(sys.argv.pop(1)), exit=True, file=open(os.dup(2), 'w')); sys.exit(pytest.main())")


def _collect(cases_dir: Path) -> list[dict[str, Any]]:
    # The in-env plugin, nothing auto-loaded.
    env = {**os.environ, "PYTHONPATH": str(INENV_DIR), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cases.json"
        proc = subprocess.run(
            [sys.executable, "-c", _PYTEST, str(DEFAULT_TIMEOUT), "--collect-only", "-q",
             *pytest_args(cases_dir), f"--harness-collect={out}", str(cases_dir)],
            capture_output=True, text=True, env=env, cwd=cases_dir, check=False,
        )
        if re.search(r"^Timeout \(", proc.stderr, re.MULTILINE):
            raise UsageError(f"{cases_dir}: cases do not collect in {DEFAULT_TIMEOUT:g} s: "
                             f"{_innermost(proc.stderr, cases_dir)} was still running")
        if proc.returncode not in (0, 5) or not out.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise UsageError(f"{cases_dir}: cases do not collect: " + (
                " | ".join(tail) or f"pytest exited {proc.returncode} and said nothing"))
        raw: list[dict[str, Any]] = json.loads(out.read_text())
    return raw


def _innermost(traceback: str, cases_dir: Path) -> str:
    """The innermost ``file:line`` under ``cases_dir`` that faulthandler's ``traceback`` names."""
    frames = re.findall(r'File "(.+)", line (\d+)', traceback)
    return next((f"{file}:{line}" for file, line in frames
                 if Path(file).is_relative_to(cases_dir.resolve())), "pytest")


def _variant(item: dict[str, Any]) -> CaseVariant:
    requires = tuple(item.get("requires", ()))
    signatures = tuple(item.get("signatures", ()))
    markers = tuple(item.get("markers", ()))
    return CaseVariant(
        case_id=item["case_id"], variant=item["variant"], nodeid=item["nodeid"],
        title=item.get("title", ""), markers=markers,
        needs_gpu=any(r.get("cuda") or r.get("cc") for r in requires),
        signatures=tuple(s["name"] for s in signatures),
        failure=item.get("failure", ""),
        upstream=tuple(upstream_url(u) for u in item.get("upstream", ())),
        description=item.get("description", ""), doc=item.get("doc", ""),
        requires=requires, signature_specs=signatures,
        caveats=tuple(item.get("caveats", ())), isolate="isolate" in markers,
        retries=_retries(item.get("retries", 0), item["nodeid"]),
        about=tuple(str(canonicalize_name(n)) for n in item.get("about", ())),
    )


def _retries(value: Any, nodeid: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10:
        raise UsageError(f"{nodeid}: Case(retries=...) must be a number from 0 to 10, "
                         f"got {value!r}")
    return value


def upstream_url(ref: str) -> str:
    """``owner/repo#123`` → its GitHub URL (GitHub redirects an issue number to its PR)."""
    match = re.fullmatch(r"([\w.-]+)/([\w.-]+)#(\d+)", ref.strip())
    if match:
        return f"https://github.com/{match[1]}/{match[2]}/issues/{match[3]}"
    return ref.strip()


def selected(case: CaseVariant, selector: str) -> bool:
    """``marker:NAME``, a path (``test_x.py``), or a glob on ``case_id`` or its label."""
    if selector.startswith("marker:"):
        return selector.removeprefix("marker:") in case.markers
    if selector.endswith(".py"):
        return case.path == selector or case.path.endswith("/" + selector)
    return fnmatchcase(case.case_id, selector) or fnmatchcase(case.label, selector)


def select_cases(cases: tuple[CaseVariant, ...], selectors: tuple[CaseSelector, ...]
                 ) -> tuple[CaseVariant, ...]:
    """The cases an environment runs: all of them when it names none."""
    if not selectors:
        return cases
    for sel in selectors:
        if not any(selected(c, sel.pattern) for c in cases):
            raise UsageError(one_line(f"{sel.where}: {sel.pattern!r} matches no case; cases "
                                      "are: " + ", ".join(sorted({c.case_id for c in cases}))))
    return tuple(c for c in cases if any(selected(c, s.pattern) for s in selectors))

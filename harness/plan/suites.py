"""A maintainer's own suite in the plan: one session cell per environment × suite × hardware,
which the run expands into one result per test."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

from harness.core.matrix import SuiteSpec
from harness.plan.cases import CaseVariant

#: The variant of a suite's session cell; a test's variant is its pytest node id.
SESSION = "(session)"


def session_variant(suite: SuiteSpec) -> CaseVariant:
    """The case a suite's session cell runs: alone in its process (it is one process)."""
    return CaseVariant(case_id=suite.name, variant=SESSION, nodeid=f"suite:{suite.name}",
                       title=f"test suite {suite.name} ({suite.target})",
                       markers=("suite", "isolate"), isolate=True, suite=suite,
                       about=tuple(suite.packages))


#: Files that make a folder pytest's rootdir, in pytest's order, and the section they need.
CONFIG_FILES = (("pytest.toml", None), (".pytest.toml", None), ("pytest.ini", None),
                (".pytest.ini", None), ("pyproject.toml", "[tool.pytest"),
                ("tox.ini", "[pytest]"), ("setup.cfg", "[tool:pytest]"))


def rootdir(path: Path) -> Path:
    """pytest's rootdir for the suite (nearest folder whose config configures pytest), else its
    own: given explicitly, so node ids do not depend on the working folder."""
    folder = path if path.is_dir() else path.parent
    for candidate in (folder, *folder.parents):
        for name, section in CONFIG_FILES:
            file = candidate / name
            with contextlib.suppress(OSError):
                if file.is_file() and (section is None
                                       or section in file.read_text(errors="replace")):
                    return candidate
    return folder


#: pytest's order in its summary line; words it does not know come after, as they came.
PYTEST_ORDER = ("failed", "passed", "skipped", "deselected", "xfailed", "xpassed", "error")


def pytest_words(counts: Counter[str]) -> str:
    """``counts`` as pytest's summary line says them: "1 failed, 2 passed, 3 errors"."""
    known = [w for w in PYTEST_ORDER if counts.get(w)]
    words = known + [w for w in counts if w not in PYTEST_ORDER and counts[w]]
    return ", ".join(f"{counts[w]} {w}s" if w == "error" and counts[w] > 1 else
                     f"{counts[w]} {w}" for w in words)

"""A maintainer's own test suite in the plan: one session cell per environment × suite ×
hardware, which the run expands into one result per test (the tests that exist are known
only inside each environment: collection runs there).

A test's result has a cell id of its own, stable across runs and machines like every cell's,
and names its session as its ``parent``.
"""

from __future__ import annotations

import hashlib
import json

from harness.core.matrix import EnvSpec, SuiteSpec
from harness.plan.cases import CaseVariant

#: The variant of a suite's session cell; a test's variant is its pytest node id.
SESSION = "(session)"


def session_variant(suite: SuiteSpec) -> CaseVariant:
    """The case a suite's session cell runs: alone in its process (it is one process)."""
    return CaseVariant(case_id=suite.name, variant=SESSION, nodeid=f"suite:{suite.name}",
                       title=f"test suite {suite.name} ({suite.target})",
                       markers=("suite", "isolate"), isolate=True, suite=suite,
                       about=tuple(suite.packages))


def suite_cell_id(env: EnvSpec, suite: str, nodeid: str, hardware: str) -> str:
    """A test's cell id: the same hash as a case cell's, over the suite-qualified node id."""
    blob = json.dumps([env.name, env.key, f"{suite}::{nodeid}", hardware]).encode()
    return hashlib.sha256(blob).hexdigest()[:12]

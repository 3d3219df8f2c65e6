"""``stable_nodeid``: the id the harness records a suite's test under, and the one a resumed
run's in-env plugin deselects by. One definition serves both, so they cannot drift apart."""

from __future__ import annotations

import inspect

import pytest

from harness.inenv import harness_suite
from harness.run import suite

EXAMPLES = [
    # A suite installed in the environment (--pyargs): named from the package.
    ("../../venv/lib/python3.11/site-packages/mylib/tests/test_a.py::t",
     "mylib/tests/test_a.py::t"),
    ("/usr/lib/python3/dist-packages/mylib/tests/test_a.py::TestX::t[1-2]",
     "mylib/tests/test_a.py::TestX::t[1-2]"),
    ("/opt/env/lib/python3.11/site-packages/pkg/test_x.py::t[a/b::c]",
     "pkg/test_x.py::t[a/b::c]"),
    # A suite in its own folder: as pytest says it, ../ and absolute paths included.
    ("tests/test_a.py::t[1]", "tests/test_a.py::t[1]"),
    ("../suite/tests/test_a.py::TestA::t", "../suite/tests/test_a.py::TestA::t"),
    ("./tests/../tests/test_a.py::t", "./tests/../tests/test_a.py::t"),
    ("/abs/tests/test_a.py::t", "/abs/tests/test_a.py::t"),
    ("tests/test_a.py", "tests/test_a.py"),
    ("", ""),
    # The first site-packages/ wins, and site-packages/ over an earlier dist-packages/.
    ("a/site-packages/b/site-packages/c.py::t", "b/site-packages/c.py::t"),
    ("a/dist-packages/b/site-packages/c.py::t", "c.py::t"),
    ("a/site-packages/b/dist-packages/c.py::t", "b/dist-packages/c.py::t"),
    # A marker is a folder: without its slash, or with another case, nothing is cut.
    ("venv/site-packages::t", "venv/site-packages::t"),
    ("venv/Site-Packages/pkg/test_a.py::t", "venv/Site-Packages/pkg/test_a.py::t"),
    ("venv/site-packages\\pkg\\test_a.py::t", "venv/site-packages\\pkg\\test_a.py::t"),
    # The marker is looked for in the whole id, the parameters too.
    ("tests/test_a.py::t[site-packages/x]", "x]"),
]


@pytest.mark.parametrize(("nodeid", "stable"), EXAMPLES)
def test_both_give_the_stable_id(nodeid: str, stable: str) -> None:
    assert suite.stable_nodeid(nodeid) == stable
    assert harness_suite.stable_nodeid(nodeid) == stable


def test_the_plugin_and_the_harness_share_one_definition() -> None:
    # The plugin imports it as a top-level module, the harness from its package: one file.
    assert inspect.getsourcefile(harness_suite.stable_nodeid) == inspect.getsourcefile(
        suite.stable_nodeid)

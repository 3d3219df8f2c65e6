"""The in-env suite plugin's ``stable_nodeid`` and the harness's agree on every node id.

``harness_suite`` runs inside the environment under test and cannot import the harness, so it
repeats ``harness.run.suite.stable_nodeid``: the harness records each test under the id the
one gives, and a resumed run deselects the tests already recorded by the id the other gives.
Were they to differ, a resumed suite would run again what it had recorded, or skip what it
had not.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness.inenv import harness_suite
from harness.run import suite

MARKERS = ("site-packages/", "dist-packages/")

#: Path segments: the markers (with their slash and without, in another case), the parts of an
#: environment's path, and dots (pytest's node ids for a suite outside the rootdir start with
#: ../).
SEGMENTS = st.one_of(
    st.sampled_from(["site-packages", "dist-packages", "Site-Packages", "DIST-PACKAGES", "lib",
                     "python3.11", "venv", ".venv", "tests", "mylib", "..", ".", "", "usr"]),
    st.text(st.characters(codec="utf-8", exclude_characters="/"), max_size=8),
)
#: What a parametrized test's brackets hold: anything, markers and separators included.
PARAMS = st.one_of(
    st.text(max_size=12),
    st.lists(st.sampled_from(["1", "a", "-", "/", "::", "[", "]", " ", *MARKERS]),
             max_size=6).map("".join),
)


@st.composite
def nodeids(draw: st.DrawFn) -> str:
    """A pytest node id: a path (relative, ../, absolute, or through an environment's
    site-packages or dist-packages), a module, ``::`` classes and a test, perhaps
    parametrized."""
    lead = draw(st.sampled_from(["", "/", "./", "../", "../../", "C:/"]))
    segments = draw(st.lists(SEGMENTS, max_size=7))
    module = draw(st.sampled_from(["test_a.py", "tests/test_b.py", "conftest.py", None]))
    path = lead + "/".join([*segments, module] if module else segments)
    names = draw(st.lists(st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,8}\Z"), max_size=3))
    params = draw(st.none() | PARAMS)
    nodeid = "::".join([path, *names])
    return nodeid if params is None else f"{nodeid}[{params}]"


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


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.one_of(nodeids(), st.text()))
@example("../../venv/lib/python3.11/site-packages/mylib/tests/test_a.py::t[1]")
@example("/usr/lib/python3/dist-packages/a/site-packages/b.py::C::t[dist-packages/]")
@example("a/dist-packages/b/site-packages/c.py::t")
def test_the_in_env_copy_agrees_with_the_harness(nodeid: str) -> None:
    assert harness_suite.stable_nodeid(nodeid) == suite.stable_nodeid(nodeid)


def test_the_generated_ids_reach_every_shape() -> None:
    """The strategy's ids include each shape the functions treat apart (checked on a fixed
    sample, so that a narrowed strategy shows here rather than as a test that cannot fail)."""
    seen: list[str] = []

    @settings(max_examples=400, deadline=None, derandomize=True, database=None)
    @given(nodeids())
    def collect(nodeid: str) -> None:
        seen.append(nodeid)

    collect()
    shapes = {
        "site-packages/": any("site-packages/" in n for n in seen),
        "dist-packages/": any("dist-packages/" in n for n in seen),
        "both markers": any(all(m in n for m in MARKERS) for n in seen),
        "a marker twice": any(n.count("site-packages/") > 1 for n in seen),
        "no marker": any(not any(m in n for m in MARKERS) for n in seen),
        "a marker without its slash": any(
            re.search(r"(site|dist)-packages(?!/)", n) for n in seen),
        "::": any("::" in n for n in seen),
        "[...]": any(n.endswith("]") and "[" in n for n in seen),
        "../": any(n.startswith("../") for n in seen),
        "absolute": any(n.startswith("/") for n in seen),
        "a marker in the brackets": any(
            "[" in n and any(m in n.split("[", 1)[1] for m in MARKERS) for n in seen),
    }
    assert all(shapes.values()), [name for name, found in shapes.items() if not found]

"""`suites:` in matrix.yaml: a maintainer's own tests as a source beside cases_dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.errors import SpecError
from harness.matrix.load import parse_matrix
from harness.plan.cells import make_plan
from harness.plan.suites import SESSION


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    (tmp_path / "tests").mkdir(exist_ok=True)
    return parse_matrix(text, file="matrix.yaml", base=tmp_path)


MATRIX = """\
version: 1
suites:
  mylib:
    pyargs: mylib.tests
    env: {MYLIB_BACKENDS: torch}
  local:
    path: tests
    package: [mylib, mylib_ext]
    args: ["-k", "not slow"]
    timeout: 120
matrices:
  mylib:
    suites: [mylib, local]
    packages: ["mylib==1.2"]
    axes:
      torch: ["2.2.2", "2.5.1"]
      numpy: ["<2", ">=2"]
"""


def test_suites_are_read_and_each_environment_plans_a_session_per_suite(tmp_path: Path
                                                                         ) -> None:
    spec = load(tmp_path, MATRIX)
    mylib, local = spec.suites
    assert (mylib.pyargs, mylib.path, mylib.packages) == ("mylib.tests", None, ("mylib",))
    assert dict(mylib.env) == {"MYLIB_BACKENDS": "torch"}
    assert local.path == str((tmp_path / "tests").resolve())
    assert (local.packages, local.args, local.timeout) == (
        ("mylib", "mylib_ext"), ("-k", "not slow"), 120.0)
    assert not spec.needs_cases  # no pytest.ini anywhere, no cases folder needed
    plan = make_plan(spec, (), ("cpu",))
    assert len(plan.cells) == 8  # 4 environments x 2 suites
    assert {c.case.variant for c in plan.cells} == {SESSION}
    assert {c.case.case_id for c in plan.cells} == {"mylib", "local"}
    assert all(c.case.isolate and c.case.suite for c in plan.cells)
    assert len({c.cell_id for c in plan.cells}) == 8


@pytest.mark.parametrize(("change", "message"), [
    (("    pyargs: mylib.tests\n", "    pyargs: mylib.tests\n    path: tests\n"),
     "matrix.yaml:3: suites.mylib: a suite needs exactly one of path:"),
    (("    path: tests\n", "    path: nowhere\n"), "no such file or folder"),
    (("suites: [mylib, local]", "suites: [mylib, other]"),
     "matrices.mylib.suites: no suite named 'other'; suites: mylib, local"),
    (("    package: [mylib, mylib_ext]", "    package: [my-lib]"),
     "suites.local.package[0]: 'my-lib' is not an import name like 'mylib'"),
    (("    timeout: 120", "    timeout: -1"), "suites.local.timeout: expected a positive"),
    (("    env: {MYLIB_BACKENDS: torch}", "    environment: {}"), "unknown key 'environment'"),
    (("    timeout: 120", "    workers: 0"),
     "suites.local.workers: expected a number of pytest-xdist workers from 1 to 256, got 0"),
])
def test_a_wrong_suite_is_a_one_line_error_at_its_line(tmp_path: Path, change: tuple[str, str],
                                                       message: str) -> None:
    old, new = change
    assert old in MATRIX
    with pytest.raises(SpecError) as info:
        load(tmp_path, MATRIX.replace(old, new))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_suite_with_workers_gets_pytest_xdist_where_the_harness_installs(
        tmp_path: Path) -> None:
    """uv (and docker, overlay) environments that run a suite with ``workers:`` install
    pytest-xdist (their key changes with it); the others, and the host, are left as they are."""
    plain = load(tmp_path, MATRIX)
    wide = load(tmp_path, MATRIX.replace("    timeout: 120", "    timeout: 120\n    workers: 4")
                + "environments:\n  here: {backend: host, suites: [local]}\n")
    assert [s.workers for s in wide.suites] == [1, 4]
    before = {e.name: e for e in plain.environments}
    for env in wide.environments:
        if env.backend == "host":
            assert "pytest-xdist>=3" not in env.requirements
            continue
        assert env.requirements == (*before[env.name].requirements, "pytest-xdist>=3")
        assert env.key != before[env.name].key
    listed = load(tmp_path, MATRIX.replace("    timeout: 120", "    workers: 2").replace(
        '"mylib==1.2"', '"mylib==1.2", "pytest-xdist==3.6.1"'))
    assert all(e.requirements[-1] == "pytest-xdist==3.6.1" for e in listed.environments)


def test_an_environment_with_suites_and_cases_runs_both(tmp_path: Path) -> None:
    spec = load(tmp_path, MATRIX.replace("    suites: [mylib, local]",
                                         "    suites: [mylib]\n    cases: [probes]"))
    assert spec.needs_cases

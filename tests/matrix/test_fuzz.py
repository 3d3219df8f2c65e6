"""Property: whatever a matrix file holds, `harness plan` answers with a plan or one line that
names file and line, exit 2, within 2 s: never a traceback, never a hang."""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import shutil
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.matrix.releases import lock_path
from tests.conftest import ROOT, examples
from tests.mutate import mutate

SEED_MATRICES = [ROOT / "matrix.yaml", ROOT / "matrices" / "gpu-host.yaml"]
LINE = re.compile(r"^harness: error: .+?:\d+: .+$")


def plan(path: Path) -> tuple[int, str, float]:
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", "-m", str(path), "--format", "json"])
    return code, err.getvalue(), time.monotonic() - start


@settings(max_examples=examples(60), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(SEED_MATRICES))
def test_a_mutated_matrix_plans_or_fails_in_one_line(tmp_path: Path, seed: int,
                                                     which: Path) -> None:
    path = which.parent / f".fuzz-{seed}.yaml"  # beside the original: cases_dir resolves
    path.write_bytes(mutate(which.read_bytes(), random.Random(seed)))
    # The original's lock, and no index: a mutated query is a one-line error, not a network call.
    if lock_path(which).is_file():
        shutil.copy(lock_path(which), lock_path(path))
    try:
        with mock.patch.dict(os.environ, {"HARNESS_OFFLINE": "1"}):
            code, err, seconds = plan(path)
    finally:
        path.unlink()
        lock_path(path).unlink(missing_ok=True)  # a mutant that keeps a release query
    assert code in (0, 2), err
    assert seconds < 2, f"{seconds:.1f} s"
    if code == 2:
        assert err.count("\n") == 1 and LINE.match(err.strip()), err
        assert len(err.strip()) <= 200 + len("harness: error: "), err


@pytest.mark.parametrize(("body", "message"), [
    (b"version: 1\na: " + b"[" * 600 + b"]" * 600 + b"\n",
     "nested more than 64 levels deep"),
    (b"version: 1\nenvironments: &x [*x]\n", "an alias refers to a value that contains it"),
    (b"version: 1\na: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
     b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
     b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
     "more than 50,000 values once aliases are expanded"),
    (b"version: 1\ndefaults: {timeout: " + b"9" * 400 + b"}\n", "a number of 400 digits"),
    (b"version: 1\nbase: &b {python: '3.11'}\ndefaults:\n  <<: *b\n", "merge keys (<<)"),
    (b"version: 1\ncases_dir: \"a\\0b\"\n", "holds a control character"),
    (b"version: 1\n# caf\xe9\n", "not UTF-8 text: byte 0xe9 at offset 16"),
    (b"version: 1\ncases_dir: nowhere\nenvironments:\n  a: {backend: host}\n",
     "not a cases folder"),
    (b"version: 1\ndefaults: {python: '" + b"3" * 5000 + b"'}\n", "\u2026"),
    (b"version: 1\ndefaults: {python: 'three'}\n", "'three' is not a Python version"),
])
def test_each_hostile_input_has_its_own_line(tmp_path: Path, body: bytes, message: str
                                             ) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(body)
    code, err, seconds = plan(path)
    assert code == 2 and message in err and LINE.match(err.strip()), err
    assert seconds < 2 and len(err.strip()) <= 216


def test_a_matrix_past_the_cell_limit_is_refused_with_its_count(tmp_path: Path) -> None:
    axis = ", ".join(f'"1.{i}"' for i in range(50))
    path = tmp_path / "m.yaml"
    path.write_text(f"version: 1\ncases_dir: {ROOT / 'cases'}\nmatrices:\n  big:\n    axes:\n"
                    f"      a: [{axis}]\n      b: [{axis}]\n      c: [{axis}]\n")
    code, err, _ = plan(path)
    assert code == 2 and "125,000 environments, over the limit of 100,000" in err, err
    with_limit = main(["plan", "-m", str(path), "--max-cells", "10", "--format", "json"])
    assert with_limit == 2

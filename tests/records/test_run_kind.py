"""A run's kind (nightly, trial, bump): history, ``--baseline latest`` and "what changed"
follow the nightly runs of one matrix, whatever trials and bumps share the folder."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.results import Outcome
from harness.records import history
from harness.records.expect import resolve_baseline
from harness.records.store import RunStore, lineage, previous_run, read_meta, run_kind
from harness.workflow import RunOptions, RunState, execute
from tests.conftest import PY, write_matrix

CASE = '''
from pathlib import Path


def test_numpy_bridge() -> None:
    assert not (Path(__file__).parent / "broken").exists()


def test_other() -> None:
    pass
'''


def cases_and_matrix(tmp_path: Path) -> Path:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    (cases / "test_bridge.py").write_text(CASE)
    return write_matrix(tmp_path / "matrix.yaml", (
        f"version: 1\ncases_dir: {cases}\n"
        "environments:\n  host: {backend: host, python: '@PY@'}\n"))


def run(tmp_path: Path, run_id: str, **options: object) -> Path:
    """A real run of the small matrix on this machine's Python, no report."""
    given: dict[str, object] = {"matrix": tmp_path / "matrix.yaml", **options}
    execute(RunState(options=RunOptions(
        reports_dir=tmp_path / "r", run_id=run_id, jobs=1, report=False,
        cache_dir=tmp_path / "cache", **given)))  # type: ignore[arg-type]
    return tmp_path / "r" / "runs" / run_id


def test_history_after_bisects_shows_the_nightly_line_not_the_trials(tmp_path: Path) -> None:
    cases_and_matrix(tmp_path)
    run(tmp_path, "night1")
    (tmp_path / "cases" / "broken").write_text("")
    run(tmp_path, "night2")  # the night it broke
    # Two bisects of it: each probe a trial of the one case, as `harness bisect` runs them.
    for bisect in range(2):
        for probe in range(2):
            run(tmp_path, f"bisect{bisect}-{probe}", kind="trial", sets=(("python", PY),),
                keyword="test_bridge.py::test_numpy_bridge")
    bump = run(tmp_path, "bump", sets=(("python", PY),))
    assert run_kind(read_meta(bump)) == "bump"
    assert run_kind(read_meta(tmp_path / "r" / "runs" / "bisect0-0")) == "trial"
    assert run_kind(read_meta(tmp_path / "r" / "runs" / "night1")) == "nightly"

    found = history.load(tmp_path / "r" / "runs", keyword="numpy_bridge")
    assert found.runs == ("night1", "night2")
    (key, outcomes), = found.rows(changed_only=True)
    assert key[1] == "bridge::numpy_bridge"
    assert outcomes == (Outcome.PASS, Outcome.FAIL)
    text = found.render(changed_only=True)
    assert text.splitlines()[0].endswith(
        f"(nightly runs of {tmp_path / 'matrix.yaml'} only; 5 of other matrices or kinds "
        "(trial, bump) left out)"), text
    assert text.splitlines()[-1].startswith("1 of 1 cells changed or flaky"), text


def test_what_changed_and_latest_follow_the_nightly_of_the_same_matrix(tmp_path: Path) -> None:
    cases_and_matrix(tmp_path)
    night = run(tmp_path, "night", keyword="test_other")
    other = tmp_path / "other.yaml"
    other.write_text((tmp_path / "matrix.yaml").read_text())
    run(tmp_path, "other-matrix", matrix=other, keyword="test_other")
    run(tmp_path, "trial", kind="trial", keyword="test_other")
    now = run(tmp_path, "now", keyword="test_other")
    # The night before, not the trial after it nor a run of another matrix file.
    assert previous_run(tmp_path / "r", now) == night
    assert previous_run(tmp_path / "r", run(tmp_path, "again", matrix=other,
                                            keyword="test_other")) == (
        tmp_path / "r" / "runs" / "other-matrix")
    run(tmp_path, "trial2", kind="trial", keyword="test_other")
    matrix = tmp_path / "matrix.yaml"
    assert resolve_baseline("latest", tmp_path / "r", matrix) == now.resolve()
    # `report now --baseline latest` judged the run by itself: every failure known.
    assert resolve_baseline("latest", tmp_path / "r", matrix, now) == night.resolve()
    assert resolve_baseline("latest", tmp_path / "r").name == "trial2"  # no matrix: as before


def test_a_record_without_a_kind_reads_as_nightly(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"matrix": "./m.yaml"}, run_id="old")
    meta = store.meta
    assert "kind" not in meta
    assert run_kind(meta) == "nightly" and lineage(meta) == ("m.yaml", "nightly")
    assert run_kind({"kind": "something else"}) == "nightly"
    (store.run_dir / "run.json").write_text(json.dumps({**meta, "kind": "trial"}))
    assert lineage(read_meta(store.run_dir)) == ("m.yaml", "trial")

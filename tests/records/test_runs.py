"""One definition of run order: created, then id; every reader of 'latest' agrees."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.records import history
from harness.records.expect import resolve_baseline
from harness.records.store import RunStore, latest_run, list_runs, newest_first, previous_run


def make_run(reports: Path, run_id: str, created: float, *, filters: dict[str, object] | None
             = None, results: bool = True, sets: dict[str, str] | None = None) -> Path:
    run = reports / "runs" / run_id
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": run_id, "created": created,
                                              "filters": filters or {}, "set": sets or {}}))
    if results:
        (run / "results.jsonl").write_text("")
    return run


def test_latest_is_the_newest_created_not_the_newest_file(tmp_path: Path) -> None:
    old = make_run(tmp_path, "b-old", 100.0)
    new = make_run(tmp_path, "a-new", 200.0)
    os.utime(old / "run.json", (10_000, 10_000))  # a copy or a restore touched the old one
    os.utime(old / "results.jsonl", (10_000, 10_000))
    assert latest_run(tmp_path) == new
    assert RunStore.open(tmp_path, "latest").run_dir == new.resolve()
    assert resolve_baseline("latest", tmp_path) == new.resolve()
    assert list(newest_first(tmp_path)) == [new, old]
    assert previous_run(tmp_path, new) == old


def test_a_tie_is_broken_by_the_run_id(tmp_path: Path) -> None:
    first = make_run(tmp_path, "x-1", 100.0)
    second = make_run(tmp_path, "x-2", 100.0)
    assert [r.path for r in list_runs(tmp_path / "runs")] == [first, second]
    assert latest_run(tmp_path) == second
    assert previous_run(tmp_path, second) == first


def test_the_previous_run_covered_the_same_slice(tmp_path: Path) -> None:
    full = make_run(tmp_path, "1-full", 100.0)
    make_run(tmp_path, "2-slice", 200.0, filters={"keyword": "mergekit*"})
    make_run(tmp_path, "3-norecord", 250.0, results=False)  # planned, nothing ran
    now = make_run(tmp_path, "4-full", 300.0)
    assert previous_run(tmp_path, now) == full
    assert latest_run(tmp_path) == now


def test_a_bump_is_compared_with_its_slice_unbumped_else_the_full_run(tmp_path: Path) -> None:
    full = make_run(tmp_path, "1-full", 100.0)
    cpu = {"only": ["env=cpu:*"]}
    sliced = make_run(tmp_path, "2-cpu", 200.0, filters=cpu)
    bump = make_run(tmp_path, "3-bump", 300.0, filters=cpu, sets={"torch": "2.6.0"})
    assert previous_run(tmp_path, bump) == sliced
    other = make_run(tmp_path, "4-bump", 400.0, filters={"keyword": "probes*"},
                     sets={"torch": "2.6.0"})
    assert previous_run(tmp_path, other) == full  # no unbumped run of its slice
    # A night's run is never compared with a bump of the night before.
    assert previous_run(tmp_path, make_run(tmp_path, "5-cpu", 500.0, filters=cpu)) == sliced


def test_history_reads_runs_in_the_same_order(tmp_path: Path) -> None:
    for name, when in (("c", 300.0), ("a", 100.0), ("b", 200.0)):
        make_run(tmp_path, name, when)
    assert [r.path.name for r in list_runs(tmp_path / "runs")] == ["a", "b", "c"]
    assert [p.name for p in history.prune(tmp_path / "runs", keep=2)] == ["a"]

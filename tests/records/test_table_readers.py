"""The readers of runs across runs read each run's table (``records.table``)."""

from __future__ import annotations

from pathlib import Path

from harness import workflow
from harness.core.results import CellResult, Outcome
from harness.planning import RunOptions, RunState, shard_durations
from harness.publish import _against_previous
from harness.records.expect import load_baseline
from harness.records.store import RunStore
from harness.records.table import CELLS

P, F = Outcome.PASS, Outcome.FAIL


def run(reports: Path, run_id: str, outcomes: dict[str, Outcome],
        created: float = 1000.0) -> RunStore:
    store = RunStore.create(reports, {"created": created}, run_id=run_id)
    store.update_meta(created=created)
    store.extend([CellResult(
        run_id=run_id, cell_id=f"{variant}-{run_id}", environment="cpu:torch=2.4",
        values={"torch": "2.4"}, env_key="k", backend="uv", case_id="probes", variant=variant,
        nodeid="n", hardware_target="cpu", outcome=outcome, duration=2.5,
        fingerprint={"key": {"torch": "2.4.1"}}) for variant, outcome in outcomes.items()])
    return store


def only_table(run_dir: Path) -> bool:
    """The run's table was made, and no other file read across runs."""
    return (run_dir / CELLS).is_file() and not (run_dir / "snapshot.json").exists()


def test_a_baseline_taken_from_a_run_reads_its_table(tmp_path: Path) -> None:
    store = run(tmp_path, "night", {"repro": P, "fixed": F})
    found = load_baseline(Path("night"), tmp_path)
    assert found.outcomes == {("cpu:torch=2.4", "probes::repro", "cpu"): P,
                              ("cpu:torch=2.4", "probes::fixed", "cpu"): F}
    assert only_table(store.run_dir)


def test_the_durations_a_shard_balances_by_come_from_the_table(tmp_path: Path) -> None:
    store = run(tmp_path, "night", {"repro": P})
    options = RunOptions(reports_dir=tmp_path, durations_from="night")
    assert shard_durations(options) == {"repro-night": 2.5}
    assert only_table(store.run_dir)


def test_a_run_without_a_report_ends_with_its_table_written(tmp_path: Path) -> None:
    store = run(tmp_path, "night", {"repro": P})
    workflow.report(RunState(options=RunOptions(reports_dir=tmp_path, report=False),
                             store=store))
    assert only_table(store.run_dir)


def test_what_changed_since_the_run_before_reads_that_runs_table(tmp_path: Path) -> None:
    before = run(tmp_path, "night1", {"repro": P, "fixed": F}, created=1000.0)
    mine = run(tmp_path, "night2", {"repro": F, "fixed": F}, created=2000.0)
    found, _, changes = _against_previous(mine, tmp_path)
    assert found is not None and found.run_id == "night1"
    assert [(c["case"], c["before"], c["after"]) for c in changes] == [
        ("probes::repro", "PASS", "FAIL")]
    assert only_table(before.run_dir)


def test_history_reads_each_runs_table_and_its_outcomes_alone_when_the_keys_are_known(
        tmp_path: Path) -> None:
    from harness.records import history

    runs = [run(tmp_path, f"night{i}", {"repro": (P, F)[i % 2], "fixed": F},
                created=1000.0 + i) for i in range(3)]
    found = history.load(tmp_path / "runs", last=3)
    assert found.cells == {("cpu:torch=2.4", "probes::repro", "cpu"): (P, F, P),
                           ("cpu:torch=2.4", "probes::fixed", "cpu"): (F, F, F)}
    assert all(only_table(r.run_dir) for r in runs)

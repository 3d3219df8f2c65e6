"""A run's record fsynced in batches (``codec.Batched``, ``RunStore.record``): each line
written at once, so a kill -9 keeps every result recorded (whole lines, at most a torn tail),
and an fsync once per batch of lines or second, and at the end of the run."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.results import CellResult, CellRun, Outcome
from harness.records import codec
from harness.records.store import RESULTS, RunStore, is_done
from harness.run.dispatch import dispatch
from tests.conftest import ROOT


def result(i: int) -> CellResult:
    return CellResult(run_id="r", cell_id=f"c{i}", environment="e", values={"torch": "2"},
                      env_key="k", backend="uv", case_id="suite", variant=f"test_{i}",
                      nodeid=f"t.py::test_{i}", hardware_target="cpu", outcome=Outcome.PASS,
                      fingerprint={"python": "3.11.7"})


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each fsync's file descriptor, as it happens (the real fsync still runs)."""
    seen: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        seen.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return seen


def test_a_thousand_results_recorded_are_a_few_fsyncs_and_sync_writes_the_rest(
        tmp_path: Path, fsyncs: list[int]) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    fsyncs.clear()  # the run folder's own files
    start = time.monotonic()
    for i in range(1000):
        store.record(CellRun(result=result(i)))
    took = time.monotonic() - start
    # One for the fingerprint in shared.jsonl, one per SYNC_LINES lines, one per second
    # the loop took at most: not one a line.
    most = 1 + 1000 // codec.SYNC_LINES + math.ceil(took / codec.SYNC_SECONDS)
    assert 1 <= len(fsyncs) <= most, (len(fsyncs), most)
    # Every line is there before any sync: written at once, only its fsync waits.
    assert [r.cell_id for r in RunStore(store.run_dir).results()] == [
        f"c{i}" for i in range(1000)]
    before = len(fsyncs)
    store.sync()
    store.sync()  # nothing left: no second fsync
    assert len(fsyncs) == before + (1000 % codec.SYNC_LINES != 0)


def test_a_line_written_a_while_after_the_last_fsync_is_fsynced_with_it(
        tmp_path: Path, fsyncs: list[int]) -> None:
    batched = codec.Batched(tmp_path / RESULTS, lines=100, seconds=0.2)
    batched.append(b'{"n": 1}\n')
    batched.append(b'{"n": 2}\n')
    assert fsyncs == []
    time.sleep(0.3)
    batched.append(b'{"n": 3}\n')
    assert len(fsyncs) == 1 and batched.pending == 0
    assert list(codec.lines(tmp_path / RESULTS)) == [b'{"n": 1}\n', b'{"n": 2}\n',
                                                     b'{"n": 3}\n']


def test_a_batched_file_is_opened_once_until_synced(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real = os.open

    def counted(path: str, *args: int) -> int:
        opened.append(str(path))
        return real(path, *args)

    monkeypatch.setattr(os, "open", counted)
    batched = codec.Batched(tmp_path / RESULTS)
    for n in range(100):
        batched.append(b'{"n": %d}\n' % n)
    assert opened == [str(tmp_path / RESULTS)]
    batched.sync()
    assert batched.fd is None
    batched.append(b'{"n": 100}\n')  # after a sync: opened again
    batched.sync()
    assert len(opened) == 2
    assert list(map(json.loads, codec.lines(tmp_path / RESULTS))) == [{"n": n} for n in range(101)]


class NoCells:
    """An executor given no cell (all of them ran on hardware this machine lacks)."""

    queues = False
    capacity = 1

    def slots_for(self, cell: object) -> int:
        return 1

    def submit(self, cells: object, **kw: object) -> list[object]:
        return []

    def partials(self) -> list[CellRun]:
        return []

    def shutdown(self, *, cancel: bool = False) -> None:
        pass


def test_the_driver_syncs_what_was_recorded_when_it_ends(
        tmp_path: Path, fsyncs: list[int]) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.record(CellRun(result=result(0)))  # the shared fingerprint: fsynced at once
    store.record(CellRun(result=result(1)))
    fsyncs.clear()
    dispatch([], NoCells(), store, on_result=lambda _: None)  # type: ignore[arg-type]
    assert len(fsyncs) == 1
    store.sync()
    assert len(fsyncs) == 1  # nothing was left to sync


RECORDER = """
import sys
from pathlib import Path
from harness.core.results import CellRun
from harness.records.store import RunStore
from tests.records.test_codec_batch import result

store = RunStore.create(Path(sys.argv[1]), {"planned": []})
for i in range(100_000):
    store.record(CellRun(result=result(i)))
    print(f"c{i}", flush=True)  # reported done
"""


@pytest.mark.parametrize("reported", [1, 7, 600, 1500])
def test_kill_9_keeps_every_result_reported_done_in_whole_lines(
        tmp_path: Path, reported: int) -> None:
    """The recording process killed after it reported ``reported`` results (and whatever it
    wrote since): every one of them is in the record, every line whole but the last, and
    resuming it would run none of them again."""
    proc = subprocess.Popen([sys.executable, "-c", RECORDER, str(tmp_path)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    done = [proc.stdout.readline().strip() for _ in range(reported)]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (run,) = (tmp_path / "runs").iterdir()
    lines = (run / RESULTS).read_bytes().split(b"\n")
    whole = [json.loads(line) for line in lines[:-1]]  # each line up to the last newline
    assert [row["cell_id"] for row in whole[:reported]] == done
    assert set(done) <= {r.cell_id for r in RunStore(run).results() if is_done(r)}

"""docs/record.md's "Reading runs with pandas" snippet, run over 30 real run folders."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.store import RunStore

DOC = Path(__file__).resolve().parents[2] / "docs" / "record.md"
OUTCOMES = (Outcome.PASS, Outcome.FAIL, Outcome.REPRODUCED)


def snippet() -> str:
    _, _, section = DOC.read_text(encoding="utf-8").partition("## Reading runs with pandas")
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/record.md: no python block under 'Reading runs with pandas'"
    return found.group(1)


def test_the_snippet_reads_thirty_runs_tables(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    expected: Counter[str] = Counter()
    for night in range(30):
        store = RunStore.create(tmp_path / "reports", {"kind": "nightly"},
                                run_id=f"2026110{night // 10}-{night:02d}")
        results = [CellResult(
            run_id=store.run_id, cell_id=f"c{cell}-{night}", environment=f"cpu:torch=2.{cell}",
            values={"torch": f"2.{cell}"}, env_key=f"k{cell}", backend="uv", case_id="probes",
            variant="repro", nodeid="n", hardware_target="cpu",
            outcome=OUTCOMES[(night + cell) % 3], duration=0.5,
            fingerprint={"key": {"torch": f"2.{cell}"}, "freeze_sha256": "f"})
            for cell in range(4)]
        store.extend(results)
        table.read(store.run_dir)  # what a run's end writes: its table
        expected.update(str(r.outcome) for r in results)
    monkeypatch.chdir(tmp_path)
    code = snippet()
    assert len(code.strip().splitlines()) == 3
    scope: dict[str, object] = {}
    exec(compile(code, str(DOC), "exec"), scope)
    cells = scope["cells"]
    assert len(cells) == 120  # type: ignore[arg-type]
    assert Counter(cells["outcome"]) == expected  # type: ignore[index]
    assert set(cells["run_id"]) == {p.name for p in (tmp_path / "reports/runs").iterdir()}  # type: ignore[index]

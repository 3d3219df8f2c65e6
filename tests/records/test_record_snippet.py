"""The pandas snippets of docs/record.md ("Reading runs with pandas") and the README ("The
report"), run over 30 real run folders."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
#: Each page, and the heading its snippet is the first python block under.
SNIPPETS = {ROOT / "docs" / "record.md": "## Reading runs with pandas",
            ROOT / "README.md": "## The report"}
OUTCOMES = (Outcome.PASS, Outcome.FAIL, Outcome.REPRODUCED)


def snippet(page: Path) -> str:
    _, _, section = page.read_text(encoding="utf-8").partition(SNIPPETS[page])
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, f"{page.name}: no python block under {SNIPPETS[page]!r}"
    return found.group(1)


@pytest.mark.parametrize("page", list(SNIPPETS), ids=lambda p: p.name)
def test_the_snippet_reads_thirty_runs_tables(page: Path, tmp_path: Path,
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
    code = snippet(page)
    assert len(code.strip().splitlines()) == 3
    scope: dict[str, object] = {}
    exec(compile(code, str(page), "exec"), scope)
    cells = scope["cells"]
    assert len(cells) == 120  # type: ignore[arg-type]
    assert Counter(cells["outcome"]) == expected  # type: ignore[index]
    assert set(cells["run_id"]) == {p.name for p in (tmp_path / "reports/runs").iterdir()}  # type: ignore[index]

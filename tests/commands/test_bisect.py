"""``harness bisect --between`` on records edited by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.records.test_damaged_lines import finished, harness

__all__ = ["finished"]  # (the fixture: a small real run)


@pytest.mark.parametrize("held", [[1], {"packages": [1]}])
def test_a_damaged_record_of_what_an_environment_held_is_one_line(
        finished: Path, tmp_path: Path, held: object) -> None:
    runs = tmp_path / "r" / "runs"
    for name in ("good", "bad"):
        shutil.copytree(finished, runs / name)
    record = runs / "bad" / "results.jsonl"
    record.write_text(record.read_text().replace('"outcome":"PASS"', '"outcome":"FAIL"'))
    (envs,) = (runs / "bad" / "envs").glob("*.json")
    envs.write_text(json.dumps(held))
    done = harness(tmp_path / "r", "bisect", "-m", str(finished.parents[2] / "matrix.yaml"),
                   "--between", "good", "bad", "-k", "behaviour::pass")
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"harness: error: run bad: no record of what host held "
                           f"({envs.name})\n"), done.stderr

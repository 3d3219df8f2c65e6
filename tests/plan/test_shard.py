"""Shards, the GitHub Actions matrix, and merging shard runs back into one: played locally,
each shard job a separate process writing its own folder, as CI runners would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import UsageError
from harness.matrix.load import parse_matrix
from harness.plan.cases import collect_cases
from harness.plan.cells import Plan, make_plan
from harness.plan.shard import fit_shards, make_shards
from harness.records.store import RunStore
from tests.conftest import DATA, PY, ROOT, report_dir
from tests.inproc import Ran, harness_main

K = "test_behaviour.py::test_[pro]*"  # pass, reproduces, other_error, os_exit
GPUS = ("--gpus", "0:sm_90,1:sm_80")
MATRIX = f"""version: 1
cases_dir: {DATA / 'behaviour'}
runners: {{sm_90: [self-hosted, h100]}}
environments:
""" + "".join(f"  host{i}: {{backend: host, python: '{PY}', timeout: 60, "
              f"hardware: [cpu, sm_90, sm_80]}}\n" for i in range(1, 5))


def harness(cwd: Path, reports: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", "--reports", str(reports), *args],
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, check=False, timeout=600)


def table(run_dir: Path) -> dict[tuple[str, str, str], str]:
    rows = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines()]
    return {(r["environment"], f"{r['case_id']}::{r['variant']}", r["hardware_target"]):
            r["outcome"] for r in rows}


def plan_of(tmp_path: Path) -> Any:
    spec = parse_matrix(MATRIX, file="m.yaml", base=tmp_path)
    return make_plan(spec, collect_cases(DATA / "behaviour"), ("cpu",))


def test_shards_are_deterministic_pure_per_hardware_and_keep_environments_whole(
        tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    shards = make_shards(plan, 5)
    assert [s.cells for s in shards] == [s.cells for s in make_shards(plan_of(tmp_path), 5)]
    assert sorted(c.cell_id for s in shards for c in s.cells) == sorted(
        c.cell_id for c in plan.cells)  # every cell exactly once
    for shard in shards:
        assert {c.hardware for c in shard.cells} <= {shard.hardware}
    owner = {(c.hardware, c.env.name): s.index for s in shards for c in s.cells}
    assert len(owner) == len({(c.hardware, c.env.name) for c in plan.cells})  # one shard each
    sizes = Counter(s.hardware for s in shards)
    assert sorted(sizes.values()) == [1, 2, 2]  # 5 shards over 3 equally heavy targets
    with pytest.raises(UsageError, match="2 shards cannot hold 3 hardware targets"):
        make_shards(plan, 2)
    with pytest.raises(UsageError, match=r"^1 shard cannot hold 3 hardware targets"):
        make_shards(plan, 1)  # was "1 shards"
    assert fit_shards(plan, 1)[1] == "1 shard cannot hold 3 hardware targets; made 3"


def test_the_workflow_played_locally_equals_the_unsharded_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(MATRIX)

    def here(reports: Path, *args: str) -> Ran:
        """In this process (the runners' jobs have theirs, as CI's would)."""
        return harness_main(capsys, "--reports", str(reports), *args, cwd=tmp_path)

    whole = here(tmp_path / "whole", "run", "-m", str(matrix), "-k", K, *GPUS,
                 "--run-id", "whole", "-j", "2")
    assert whole.returncode == 1, whole.stderr  # FAIL and CRASH cells, on purpose
    gha = here(tmp_path / "plan", "plan", "-m", str(matrix), "-k", K, *GPUS,
               "--format", "gha", "--shards", "4")
    jobs = json.loads(gha.stdout)["include"]
    assert len(jobs) == 4 and {j["hardware"] for j in jobs} == {"cpu", "sm_90", "sm_80"}
    assert next(j for j in jobs if j["hardware"] == "sm_90")["runs-on"] == [
        "self-hosted", "h100"]
    folders = []
    for job in jobs:  # each job on its own runner: its own process and folder
        index = job["shard"].split("/")[0]
        out = tmp_path / f"artifact-{index}"
        ran = harness(tmp_path, out, "run", "-m", str(matrix), "-k", K, *GPUS, "--shard",
                      job["shard"], "--run-id", job["artifact"], "-j", "2", "--no-report")
        assert ran.returncode in (0, 1), ran.stderr
        folders.append(out / "runs" / job["artifact"])
    merged = here(tmp_path / "merged", "merge", *map(str, folders), "--run-id", "nightly")
    assert "0 MISSING" in merged.stdout, merged.stdout + merged.stderr
    got = table(tmp_path / "merged" / "runs" / "nightly")
    assert got == table(tmp_path / "whole" / "runs" / "whole") and len(got) == 4 * 4 * 3
    first = (tmp_path / "merged" / "runs" / "nightly" / "results.jsonl").read_bytes()
    here(tmp_path / "merged", "merge", *map(str, folders), "--run-id", "nightly")
    assert (tmp_path / "merged" / "runs" / "nightly" / "results.jsonl").read_bytes() == first
    # The merge's report, made from the results it held and in the record's order (a merge
    # writes it in plan order, run.json ``ordered_cells``), is byte for byte the report of
    # the record read back, and that of the record sorted into plan order.
    nightly = tmp_path / "merged" / "runs" / "nightly"
    again = here(tmp_path / "merged", "report", "nightly", "--out",
                 str(nightly / "report-again"))
    meta = json.loads((nightly / "run.json").read_text())
    assert meta.pop("ordered_cells") == len(got)
    (nightly / "run.json").write_text(json.dumps(meta))
    resorted = here(tmp_path / "merged", "report", "nightly", "--out",
                    str(nightly / "report-sorted"))
    assert again.returncode == resorted.returncode == 0, again.stderr + resorted.stderr
    for name in ("compat.csv", "compat.json", "compat.md", "junit.xml", "cells.html"):
        made = (nightly / "report" / name).read_bytes()
        assert made == (nightly / "report-again" / name).read_bytes(), name
        assert made == (nightly / "report-sorted" / name).read_bytes(), name

    # A shard whose artifact never arrived: its cells are MISSING, counted, not absent.
    lost = jobs[1]
    partial = here(tmp_path / "partial", "merge",
                   *[str(f) for f in folders if lost["artifact"] not in str(f)])
    assert f"{lost['cells']} MISSING" in partial.stdout, partial.stdout + partial.stderr
    (run,) = (tmp_path / "partial" / "runs").iterdir()
    outcomes = Counter(table(run).values())
    assert outcomes["MISSING"] == lost["cells"] and sum(outcomes.values()) == len(got)
    said = {json.loads(x).get("reason") for x in (run / "results.jsonl").read_text().splitlines()}
    assert f"no result: shard {lost['shard']} never reported (its artifact is missing)" in said
    assert partial.returncode == 1
    md = (report_dir(tmp_path / "partial") / "compat.md").read_text()
    assert "❔ MISSING" in md
    # The late artifact arrives: merged into the partial merge, it fills the gap.
    late = next(f for f in folders if lost["artifact"] in str(f))
    filled = here(tmp_path / "filled", "merge", str(run), str(late))
    assert "0 MISSING" in filled.stdout and filled.returncode == 1, filled.stdout
    (refilled,) = (tmp_path / "filled" / "runs").iterdir()
    assert table(refilled) == got
    # Logs moved with the merge: every result's log is inside the merged folder.
    rows = [json.loads(x) for x in (tmp_path / "merged" / "runs" / "nightly" /
                                    "results.jsonl").read_text().splitlines()]
    assert all((tmp_path / "merged" / "runs" / "nightly" / r["log"]).is_file()
               for r in rows if r.get("log"))  # a line leaves out a default


def test_a_plan_of_no_cells_shards_into_empty_jobs(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`hardware: []` plans no cell: `--format gha` and `run --shard` were an IndexError."""
    (tmp_path / "matrix.yaml").write_text(MATRIX.replace("cpu, sm_90, sm_80", ""))
    assert [s.cells for s in make_shards(Plan(cells=()), 2)] == [(), ()]
    ran = harness_main(capsys, "plan", "--format", "gha", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, '{"include":[]}\n'), ran.stderr


@pytest.mark.parametrize(("shard", "ran"), [("1/3", "shard 1/3 of its plan"),
                                            (None, "its whole plan")])
def test_resuming_a_run_as_another_shard_is_refused(tmp_path: Path, shard: str | None,
                                                    ran: str) -> None:
    """It ran nothing and exited 0: every cell of the run another shard's."""
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    RunStore.create(tmp_path / "reports", {"planned": [], "shard": shard}, run_id="s1")
    proc = harness(tmp_path, tmp_path / "reports", "run", "-k", K, "--shard", "2/3",
                   "--resume", "s1")
    assert (proc.returncode, proc.stderr) == (2, f"harness: error: --resume s1 ran {ran}, not "
                                                 "--shard 2/3: resume it without --shard\n")

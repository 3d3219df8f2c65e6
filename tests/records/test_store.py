from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from msgspec.structs import replace

from harness.core.errors import StoreError
from harness.core.results import CellResult, Outcome
from harness.records import codec, reportinput
from harness.records.compare import choose_records
from harness.records.merge import merge_runs
from harness.records.store import RunStore, list_runs, read_shared
from harness.report.build import diff_runs, summary_line, write_report
from harness.report.data import long_columns


def result(cell: str, env: str, variant: str, outcome: Outcome) -> CellResult:
    return CellResult(run_id="r", cell_id=cell, environment=env, values={"torch": env},
                      env_key="k", backend="uv", case_id="mergekit_fp16", variant=variant,
                      nodeid=f"t.py::test_{variant}", hardware_target="cpu", outcome=outcome,
                      fingerprint={"python": "3.11.7", "key": {"torch": env}, "torch": {}})


def test_torn_last_line_is_skipped_and_last_record_wins(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(result("a", "2.0.1", "repro", Outcome.ERROR))
    store.append(result("a", "2.0.1", "repro", Outcome.REPRODUCED))
    store.append(result("b", "2.0.1", "workaround", Outcome.PASS))
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(b'{"run_id": "r", "cell_id": "c", "outc')  # killed mid-write
    got = {r.cell_id: r.outcome for r in RunStore.open(tmp_path, "latest").results()}
    assert got == {"a": Outcome.REPRODUCED, "b": Outcome.PASS}


def test_a_record_read_line_by_line_gives_every_line_as_it_is(tmp_path: Path) -> None:
    lines = [json.dumps({"n": i, "pad": "x" * (i % 7)}).encode() for i in range(200)]
    lines[57] = b'{"n": 57, "torn'  # a line a kill tore, mid-record (a resumed run's)
    lines[120] = b""  # a blank one
    lines.append(b'{"n": 200}')  # the last without its newline
    path = tmp_path / "results.jsonl"
    path.write_bytes(b"\n".join(lines))
    ended = [line + b"\n" for line in lines[:-1]] + lines[-1:]  # each with its newline
    assert list(codec.lines(path)) == ended
    assert list(codec.lines(path, 30)) == [ended[0], ended[1][:10]]
    assert list(codec.lines(path, 0)) == []
    path.write_bytes(b"")
    assert list(codec.lines(path)) == []
    path.write_bytes(b"\n\n")
    assert list(codec.lines(path)) == [b"\n", b"\n"]


def test_a_run_as_of_a_size_reads_what_its_record_held_then(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(result("a", "2.0.1", "repro", Outcome.PASS))
    store.append(result("b", "2.0.1", "repro", Outcome.PASS))
    size = (store.run_dir / "results.jsonl").stat().st_size
    then = store.as_of(size)
    store.append(result("c", "2.0.1", "repro", Outcome.FAIL))  # the run goes on
    assert [r.cell_id for r in then.results()] == ["a", "b"]
    assert [r.cell_id for r in store.results()] == ["a", "b", "c"]
    assert [r.cell_id for r in store.as_of(size - 5).results()] == ["a"]  # b cut: torn
    assert store.as_of(0).results() == []
    assert then.run_id == store.run_id and then.upto == size and store.upto is None


def test_shared_values_are_written_once_and_read_back_whole(tmp_path: Path) -> None:
    """Format 4: a fingerprint and a machine that thousands of lines share are one line of
    shared.jsonl, named by their content; each result line holds the name and reads back the
    value. A value given inline (an older record) still reads."""
    store = RunStore.create(tmp_path, {"planned": []})
    machine = {"cpu": "EPYC", "cpus": 2, "gpus": []}
    first = replace(result("a", "2.0.1", "repro", Outcome.PASS), hardware=machine)
    store.extend([first, replace(result("b", "2.0.1", "workaround", Outcome.PASS),
                                 hardware=dict(machine))])
    store.append(result("c", "2.0.1", "repro", Outcome.PASS))  # the same fingerprint, later
    with open(store.run_dir / "results.jsonl", "a") as fh:  # a format 3 line: inline values
        fh.write(json.dumps({**result("d", "2.1.0", "repro", Outcome.FAIL).to_dict(),
                             "outcome": "FAIL"}) + "\n")
    shared = (store.run_dir / "shared.jsonl").read_text().splitlines()
    assert len(shared) == 2  # one fingerprint (three lines share it) and one machine
    lines = [json.loads(x) for x in (store.run_dir / "results.jsonl").read_text().splitlines()]
    assert [isinstance(x["fingerprint"], str) for x in lines] == [True, True, True, False]
    assert lines[0]["fingerprint"] == lines[2]["fingerprint"]
    got = {r.cell_id: r for r in RunStore(store.run_dir).results()}
    assert got["a"] == first and got["b"].hardware == machine and got["c"].hardware == {}
    assert got["d"].fingerprint["key"] == {"torch": "2.1.0"}


def test_summary_line_counts_cells_and_environments() -> None:
    results = [result("a", "2.0.1", "repro", Outcome.REPRODUCED),
               result("b", "2.15.0", "repro", Outcome.PASS),
               result("c", "2.15.0", "workaround", Outcome.NOT_RUN)]
    assert summary_line(long_columns(results)) == (
        "3 cells in 2 environments: 1 PASS, 1 REPRODUCED, 1 NOT_RUN")
    assert summary_line(long_columns(results[:1])) == "1 cell in 1 environment: 1 REPRODUCED"


def test_write_report_writes_four_formats(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(result("a", "2.0.1", "repro", Outcome.REPRODUCED))
    paths = write_report(store, tmp_path)
    assert "🐞 REPRODUCED" in paths["md"].read_text()
    assert "REPRODUCED" in paths["csv"].read_text()
    assert '"summary"' in paths["json"].read_text()
    assert "<table" in paths["failure-mergekit_fp16.html"].read_text()


def test_a_caveat_marks_the_cell_and_is_listed_under_the_table(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    plain = result("a", "2.0.1", "repro", Outcome.PASS)
    noted = result("b", "2.0.1", "workaround", Outcome.PASS)
    store.append(plain)
    store.append(CellResult.from_dict({**noted.to_dict(),
                                       "details": {"caveat": "FP8 off: no TE modules remain"}}))
    md = write_report(store, tmp_path)["md"].read_text()
    assert "workaround: ✅ PASS †" in md and "repro: ✅ PASS<br>" in md
    assert "† workaround: FP8 off: no TE modules remain" in md


def test_diff_lists_new_failures_first() -> None:
    old = [result("a", "x", "repro", Outcome.PASS), result("b", "y", "repro", Outcome.FAIL)]
    new = [result("a", "x", "repro", Outcome.CRASH), result("b", "y", "repro", Outcome.PASS)]
    changes = diff_runs(old, new)
    assert [(c["before"], c["after"]) for c in changes] == [("PASS", "CRASH"), ("FAIL", "PASS")]


def test_a_run_folder_moved_elsewhere_still_renders_with_working_log_links(
        tmp_path: Path) -> None:
    import re
    import shutil
    import subprocess
    import sys

    from harness.core.results import CellRun
    from tests.conftest import ROOT

    store = RunStore.create(tmp_path / "here", {"planned": []}, run_id="nightly-shard-3",
                            cases={"mergekit_fp16::repro": {
                                "case": "mergekit_fp16", "variant": "repro",
                                "failure": "addmm_impl_cpu_ not implemented for 'Half'",
                                "upstream": ["https://github.com/arcee-ai/mergekit/issues/175"],
                                "signatures": [{"name": "addmm-half-cpu"}], "caveats": []}})
    recorded = store.record(CellRun(result=result("a", "2.0.1", "repro", Outcome.REPRODUCED),
                                    log=b"RuntimeError: addmm_impl_cpu_\n"))
    assert recorded.log == "logs/a.log"  # relative to the run folder
    moved = tmp_path / "elsewhere" / "copied-run"
    shutil.move(store.run_dir, moved)
    out = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "harness", "--reports", str(out), "report",
                           str(moved)], capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    site = moved / "report"  # a run's report goes into its own folder
    page = (site / "failure-mergekit_fp16.html").read_text()
    (href,) = re.findall(r'<a href="([^"]+\.log)"', page)
    assert (site / href).resolve().read_bytes() == b"RuntimeError: addmm_impl_cpu_\n"
    assert "https://github.com/arcee-ai/mergekit/issues/175" in page  # from the record
    assert "addmm-half-cpu" in (site / "compat.md").read_text()


def test_a_caveat_is_a_field_of_the_result(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(CellResult.from_dict({**result("b", "2.0.1", "workaround", Outcome.PASS)
                                       .to_dict(), "caveat": "FP8 is off"}))
    md = write_report(store, tmp_path)["md"].read_text()
    assert "workaround: ✅ PASS †" in md and "† workaround: FP8 is off" in md


def test_several_records_merge_into_one_table(tmp_path: Path) -> None:
    first = RunStore.create(tmp_path, {"planned": []}, run_id="shard-1")
    second = RunStore.create(tmp_path, {"planned": []}, run_id="shard-2")
    first.append(result("a", "2.0.1", "repro", Outcome.REPRODUCED))
    second.append(result("b", "2.5.1", "repro", Outcome.PASS))
    paths = write_report([first, second], tmp_path)
    md = paths["md"].read_text()
    assert "run shard-1, shard-2" in md and "2 of 2 cells ran (1 PASS, 1 REPRODUCED)" in md


def test_an_existing_run_id_is_not_overwritten(tmp_path: Path) -> None:
    import pytest

    from harness.core.errors import UsageError

    RunStore.create(tmp_path, {"planned": []}, run_id="nightly")
    with pytest.raises(UsageError, match="already exists"):
        RunStore.create(tmp_path, {"planned": []}, run_id="nightly")


def test_a_pin_change_and_a_flip_are_told_apart_by_logical_key() -> None:
    """The cell ids change with the pin (content hash); the logical keys do not."""
    def run(torch: str, flip: Outcome) -> list[CellResult]:
        rows = []
        for variant, outcome in (("repro", Outcome.REPRODUCED), ("workaround", flip),
                                 ("other", Outcome.PASS)):
            rows.append(CellResult.from_dict({**result(f"{torch}-{variant}", "cpu", variant,
                                                       outcome).to_dict(),
                                              "fingerprint": {"key": {"torch": torch},
                                                              "freeze_sha256": torch}}))
        return rows

    last_night = run("2.0.1", Outcome.PASS)
    tonight = run("2.1.0", Outcome.FAIL)
    tonight[2] = CellResult.from_dict({**tonight[2].to_dict(),
                                       "fingerprint": last_night[2].fingerprint})
    changes = diff_runs(last_night, tonight)
    assert [(c["class"], c["case"]) for c in changes] == [
        ("new failure", "mergekit_fp16::workaround"),
        ("versions changed", "mergekit_fp16::repro")]
    assert changes[1]["versions"] == {"torch": "2.0.1 -> 2.1.0"}
    assert diff_runs(tonight, last_night)[0]["class"] == "fixed"


def test_the_json_download_keeps_each_fingerprint_once_and_every_difference(
        tmp_path: Path) -> None:
    import json

    store = RunStore.create(tmp_path, {"planned": []})
    same = [result(f"c{i}", "2.0.1", f"v{i}", Outcome.PASS) for i in range(3)]
    odd = CellResult.from_dict({**result("c9", "2.0.1", "v9", Outcome.PASS).to_dict(),
                                "fingerprint": {"key": {"torch": "2.0.1+other"}}})
    gpus = [replace(result(f"g{i}", "2.0.1", "gpu", Outcome.PASS), node="n", gpu=i,
                    hardware={"cpu": "x", "gpus": [{"index": i}]}) for i in range(2)]
    for r in [*same, odd, *gpus]:
        store.append(r)
    data = json.loads(write_report(store, tmp_path / "out")["json"].read_text())
    assert data["fingerprints"] == {"k": same[0].fingerprint}
    table = data["results"]
    cells = [dict(zip(table["columns"], r, strict=True)) for r in table["data"]]
    rows = {r["cell_id"]: r for r in cells}
    assert rows["c0"]["fingerprint"] is None  # its key's
    assert rows["c9"]["fingerprint"] == {"key": {"torch": "2.0.1+other"}}
    assert data["machines"] == {f"n#{i}": gpus[i].hardware for i in range(2)}  # node#gpu
    assert rows["g1"]["hardware"] is None and rows["g1"]["gpu"] == 1


def test_the_heatmap_has_a_row_per_environment_and_target_a_column_per_variant() -> None:
    from harness.report.data import heatmap as _heatmap

    columns = {"environment": ["b", "b", "a", "b", "a"],
               "hardware": ["cpu", "cpu", "cpu", "sm_90", "cpu"],
               "column": ["c::w", "c::r", "c::r", "c::r", "c::r"],
               "outcome": ["PASS", "REPRODUCED", "FAIL", "SKIP", "CRASH"]}
    assert _heatmap(columns) == [  # rows as they first come; the later of two records wins
        [Outcome.REPRODUCED, Outcome.PASS], [Outcome.CRASH, None], [Outcome.SKIP, None]]


def test_a_rule_that_cannot_be_read_stops_the_report_before_any_file(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, {"planned": [], "expect": [{"outcome": ["PASSED"],
                                                                  "why": "hand-edited"}]})
    store.append(result("a", "2.0.1", "repro", Outcome.PASS))
    with pytest.raises(StoreError, match=r"run\.json: expect\[0\]\.outcome\[0\]: .*'PASSED'"):
        write_report(store, tmp_path / "report")
    assert list((tmp_path / "report").iterdir()) == []


def test_each_cell_keeps_its_first_place_and_its_last_attempt_as_one_record_chooses(
        tmp_path: Path) -> None:
    """``results``: a retried cell where it first appeared, with its last attempt; a report
    of one record takes them as they are, which is what choosing across records gives."""
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(result("a", "2.0.1", "repro", Outcome.ERROR))
    store.append(result("b", "2.0.1", "workaround", Outcome.PASS))
    store.append(replace(result("a", "2.0.1", "repro", Outcome.REPRODUCED), attempt=2))
    store.append(result("c", "2.1.2", "repro", Outcome.SKIP))
    got = store.results()
    assert [(r.cell_id, r.outcome) for r in got] == [
        ("a", Outcome.REPRODUCED), ("b", Outcome.PASS), ("c", Outcome.SKIP)]
    chosen = list(choose_records([store])[0].values())
    assert [r for _, r in chosen] == got


def test_shared_values_are_read_as_json_reads_them_line_by_line(tmp_path: Path) -> None:
    """shared.jsonl's numbers are checked once for the file: a line orjson refuses (NaN) is
    still read as json reads it, a torn one skipped, the others read by orjson."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "shared.jsonl").write_bytes(
        b'["a", {"x": 1.5}]\n["b", {"x": NaN}]\n["c", {"x"\n["d", [1, 2]]\n')
    found = list(read_shared(run))
    assert found[0] == ("a", {"x": 1.5}) and found[2] == ("d", [1, 2]) and len(found) == 3
    assert found[1][0] == "b" and math.isnan(found[1][1]["x"])


def test_a_line_leaves_out_fields_at_their_default_and_every_reader_fills_them(
        tmp_path: Path) -> None:
    """A line holds only what differs from a result's defaults; the msgspec fast path, the
    line-by-line reader (a torn line makes the store use it) and an older full line agree."""
    store = RunStore.create(tmp_path, {"planned": []})
    plain = result("a", "2.0.1", "repro", Outcome.PASS)
    retried = replace(result("b", "2.0.1", "repro", Outcome.FAIL), attempt=2, duration=1.5)
    store.extend([plain, retried])
    with open(store.run_dir / "results.jsonl", "a") as fh:  # an older line: every field
        fh.write(json.dumps({**result("c", "2.0.1", "repro", Outcome.SKIP).to_dict(),
                             "outcome": "SKIP"}) + "\n")
    lines = [json.loads(x) for x in (store.run_dir / "results.jsonl").read_text().splitlines()]
    assert "reason" not in lines[0] and "attempt" not in lines[0] and "infra" not in lines[0]
    assert lines[1]["attempt"] == 2 and lines[1]["duration"] == 1.5
    fast = RunStore(store.run_dir).results()
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(b'{"run_id": "r", "cell_id": "d", "outc')  # torn: read line by line
    slow = RunStore(store.run_dir).results()
    assert fast == slow and [r.cell_id for r in fast] == ["a", "b", "c"]
    assert fast[:2] == [plain, retried]


META_EDITS = [
    ([1, 2], "Expected `object`, got `array`"),
    ({"created": "yesterday"}, "created: Expected `float | null`, got `str`"),
    ({"created": -5}, "created: Expected `float` >= 0.0"),
    ({"created": 1e20}, "created: Expected `float` <= 253402300799"),  # no date to write
    ({"filters": ["a"]}, "filters: "),
    ({"set": ["a"]}, "set: "),
    ({"kind": "weekly"}, "kind: Invalid enum value 'weekly'"),
    ({"format": 5}, "format 5: written by a newer harness (this one reads up to 4)"),
    ({"format": "four"}, "format: "),
    ({"environments": {"host": 1}}, "environments[...]: "),
    ({"environments": {"host": {"requirements": 5}}}, "environments[...].requirements: "),
    ({"expect": [{"x": 1}]}, "expect[0]: Object missing required field `outcome`"),
    ({"expect": [{"outcome": ["GREAT"], "why": ""}]}, "expect[0].outcome[0]: Invalid enum"),
]


@pytest.mark.parametrize(("edit", "said"), META_EDITS, ids=[m[1].split(":")[0] for m in META_EDITS])
def test_a_damaged_run_json_is_an_error_naming_its_field_and_left_out_of_listings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, said: str) -> None:
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    meta = edit if isinstance(edit, list) else {"run_id": "x", "created": 1.0, **edit}
    (run / "run.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError) as raised:
        RunStore.open(tmp_path, "x")
    assert str(raised.value).startswith(f"{run / 'run.json'}: {said}"), raised.value
    assert list_runs(tmp_path / "runs") == list_runs(tmp_path / "runs") == []
    warned = capsys.readouterr().err.splitlines()  # said once, where the runs are listed
    assert warned == [f"harness: warning: {raised.value}; the run is left out"]


FILE_EDITS = [
    ("cases.json", [1], "Expected `object`, got `array`"),
    ("cases.json", {"a::b": 5}, "[...]: Expected `object`, got `int`"),
    ("cases.json", {"a::b": {"case": "a", "variant": "b", "signatures": [{}]}},
     "[...].signatures[0]: Object missing required field `name`"),
]


@pytest.mark.parametrize(("name", "edit", "said"), FILE_EDITS)
def test_a_cases_file_of_the_wrong_shape_is_an_error_naming_its_field(
        tmp_path: Path, name: str, edit: object, said: str) -> None:
    store = RunStore.create(tmp_path, {"planned": []})
    (store.run_dir / name).write_text(json.dumps(edit))
    with pytest.raises(StoreError) as raised:
        store.cases  # noqa: B018
    assert str(raised.value) == f"{store.run_dir / name}: {said}"


PLAN_EDITS = [
    ({"a": 1}, "Expected `array`, got `object`"),
    (["a"], "[0]: Expected `object`, got `str`"),
    ([{"x": 1}], "[0]: Object missing required field `cell_id`"),
    ([{"cell_id": "gap"}], "[0]: Object missing required field `environment`"),  # a merge's gap
]


@pytest.mark.parametrize(("edit", "said"), PLAN_EDITS)
def test_a_plan_of_the_wrong_shape_is_an_error_naming_its_field(
        tmp_path: Path, edit: object, said: str) -> None:
    store = RunStore.create(tmp_path, {"planned": []}, run_id="r")
    store.append(result("a", "2.0.1", "repro", Outcome.PASS))
    (store.run_dir / "plan.json").write_text(json.dumps(edit))
    reads = [lambda: merge_runs([store], tmp_path, run_id="m")]
    if "gap" not in json.dumps(edit):  # (a report reads the ids alone)
        reads.append(lambda: reportinput.read(store))
    for read in reads:
        with pytest.raises(StoreError) as raised:
            read()
        assert str(raised.value) == f"{store.run_dir / 'plan.json'}: {said}"


def test_a_fingerprint_shared_jsonl_lacks_is_warned_of(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """shared.jsonl lost or torn: the cells naming its values read with no fingerprint, and
    a warning says so (once), rather than a report silently without versions."""
    store = RunStore.create(tmp_path, {"planned": []})
    store.extend([result("a", "2.0.1", "repro", Outcome.PASS),
                  result("b", "2.0.1", "workaround", Outcome.PASS)])
    (store.run_dir / "shared.jsonl").write_text("")
    assert [r.fingerprint for r in store.results()] == [{}, {}]
    store.results()
    assert capsys.readouterr().err == (
        f"harness: warning: {store.run_dir / 'shared.jsonl'}: lacks 2 values results.jsonl names"
        " (fingerprints, machines); read as unknown\n")


def test_a_record_or_shared_values_that_cannot_be_read_are_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """results.jsonl or shared.jsonl a folder (or a file this user may not read): the record
    is a one-line error, shared.jsonl's values read as unknown, said."""
    store = RunStore.create(tmp_path, {"planned": []})
    store.append(result("a", "2.0.1", "repro", Outcome.PASS))
    (store.run_dir / "shared.jsonl").unlink()
    (store.run_dir / "shared.jsonl").mkdir()
    assert [r.fingerprint for r in store.results()] == [{}]
    assert "shared.jsonl: lacks 1 values" in capsys.readouterr().err
    (store.run_dir / "results.jsonl").unlink()
    (store.run_dir / "results.jsonl").mkdir()
    with pytest.raises(StoreError, match=r"results\.jsonl: unreadable: Is a directory$"):
        store.results()

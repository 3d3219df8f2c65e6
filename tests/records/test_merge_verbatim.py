"""The merge writes each chosen line as its shard wrote it: the merged record must be, as data,
what merging through full decoding gives (every shard read into ``CellResult``s by the store,
chosen by ``choose_records``, written by ``RunStore.extend``), whatever the shards hold:
reruns, NOT_RUN, lost machines, conflicts, gaps, cells no plan names, lost logs, lines from
older formats or by hand, a secret of this machine's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from msgspec.structs import replace

from harness.core import jsonio
from harness.core.errors import StoreError, UsageError
from harness.core.results import CellResult, CellRun, Outcome
from harness.core.rules import Rule
from harness.records import codec, table
from harness.records import store as store_module
from harness.records.compare import choose_records
from harness.records.expect import judged_summary
from harness.records.merge import MergeReport, _full_plan, _Gaps, merge_runs
from harness.records.store import RunStore
from tests.conftest import examples

# In plan order, which is not the order of their ids.
CELLS = [{"cell_id": f"c{i * 5 % 12:02d}", "environment": f"env-{i % 3}",
          "values": {"torch": f"2.{i % 3}.0"}, "backend": "uv", "case": "case",
          "variant": f"v{i % 2}", "nodeid": f"t.py::test_{i}", "hardware": "cpu"}
         for i in range(12)]
MACHINES = [{"cpu": "EPYC", "cpus": 2, "gpus": []}, {"cpu": "Xeon", "cpus": 8, "gpus": ["H100"]}]


def result(cell: dict[str, Any], run_id: str, outcome: Outcome, **changes: Any) -> CellResult:
    env = cell["environment"]
    return replace(CellResult(
        run_id=run_id, cell_id=cell["cell_id"], environment=env, values=cell["values"],
        env_key=f"key-{env}", backend="uv", case_id=cell["case"], variant=cell["variant"],
        nodeid=cell["nodeid"], hardware_target=cell["hardware"], outcome=outcome,
        fingerprint={"python": "3.11.7", "key": {"torch": cell["values"]["torch"]}},
        hardware=MACHINES[0], finished_at=1.0), **changes)


def shard(reports: Path, run_id: str, label: str | None, planned: list[dict[str, Any]]
          ) -> RunStore:
    meta: dict[str, Any] = {"planned": planned, "shard": label,
                            "expect": [{"case": "case", "outcome": ["FAIL"], "why": "known"}]}
    if label:
        meta["full_plan"] = CELLS
    return RunStore.create(reports, meta, run_id=run_id)


def record(store: RunStore, res: CellResult, *, log: bool = True) -> None:
    """As a run records a cell: its log, its fingerprint, its line (shared values named)."""
    store.record(CellRun(result=res, log=f"log of {res.cell_id}".encode() if log else b"",
                         fingerprint=res.fingerprint))


def add_line(store: RunStore, row: dict[str, Any] | bytes) -> None:
    with open(store.run_dir / "results.jsonl", "ab") as fh:
        fh.write(row if isinstance(row, bytes) else json.dumps(row).encode() + b"\n")


def reference(sources: list[RunStore], reports: Path, run_id: str
              ) -> tuple[RunStore, list[CellResult], list[str]]:
    """The merge as it was before its lines were passed through: every record decoded,
    chosen by select's rules, its log relocated, each line encoded again by the store."""
    metas = [s.meta for s in sources]
    chosen, conflicts = choose_records(sources)
    gaps = _Gaps(sources, metas)  # which shard was to run a cell that has no result

    def moved(source: RunStore, res: CellResult) -> CellResult:
        if not res.log:
            return res
        absolute = Path(res.log).is_absolute()  # a record before format 2
        path = Path(res.log) if absolute else source.run_dir / res.log
        relative = f"logs/{path.name}" if absolute else res.log
        return replace(res, log=relative if path.is_file() else None)

    planned = _full_plan(sources, metas)
    lines = []
    for cell in planned:
        found = chosen.get(cell["cell_id"])
        if found is None or found[1].outcome is Outcome.MISSING:
            lines.append(gaps.missing(cell["cell_id"], run_id))
        else:
            lines.append(moved(*found))
    known = {c["cell_id"] for c in planned}
    lines += sorted((moved(*f) for cid, f in chosen.items() if cid not in known),
                    key=lambda r: (r.logical_key, r.cell_id))
    ref = RunStore.create(reports, {"planned": []}, run_id="reference")
    ref.extend(lines)
    return ref, lines, conflicts


def text(results: list[CellResult]) -> str:
    """Results as JSON text: equal where their values are (a NaN too, unlike ``==``)."""
    return json.dumps([r.to_dict() for r in results], sort_keys=True)


def shared_text(store: RunStore) -> bytes | None:
    path = store.run_dir / "shared.jsonl"
    return path.read_bytes() if path.exists() else None


#: A line's optional fields and their defaults: a line without one means the same.
OPTIONAL = {f.name: f.default_factory() if f.default is msgspec.NODEFAULT else f.default
            for f in msgspec.structs.fields(CellResult) if not f.required}


def rows(store: RunStore) -> list[dict[str, Any]]:
    return [{**OPTIONAL, **json.loads(x)}
            for x in (store.run_dir / "results.jsonl").read_bytes().splitlines()]


def assert_merged_as_reference(sources: list[RunStore], tmp: Path) -> RunStore:
    warned: list[str] = []
    merged = merge_runs(sources, tmp / "out", run_id="merged", warn=warned.append)
    ref, results, conflicts = reference(sources, tmp / "ref", "merged")
    out = merged.store
    assert rows(out) == rows(ref)  # line for line, in order, as data
    # The same values, once each, in the same order (none: no file).
    assert shared_text(out) == shared_text(ref)
    assert out.attempts() == ref.attempts()
    # What the report is made from: what was written (read back, if a secret was redacted).
    held = ref.results() if out.redactor.secrets else results
    assert text(merged.written) == text(held) and merged.cells == len(results)
    assert merged.conflicts == warned == conflicts
    assert merged.missing == sum(r.outcome is Outcome.MISSING for r in results)
    for res in results:  # every log a line names came along, with its content
        if res.log:
            assert (out.run_dir / res.log).read_bytes().startswith(b"log of ")
    assert_decoded_as_through_orjson(sources, tmp, merged)
    return out


def assert_table_as_from_the_record(merged: MergeReport) -> None:
    """The table a merge writes from what it hands on (``commands.records``: the lines as
    decoded, the names they hold) is the table made from the merged record, row for row."""
    run_dir = merged.store.run_dir
    assert table.write(run_dir, merged.written, table.stamp(run_dir))
    written = table.current(run_dir)
    (run_dir / table.CELLS).unlink()
    assert written is not None and written.data == table.read(run_dir).data


#: What counting and judging read of a result.
JUDGED = ("cell_id", "parent", "environment", "case_id", "variant", "hardware_target",
          "outcome", "reason", "logical_key")


class _Refusing:
    def decode(self, _: bytes) -> None:
        raise msgspec.DecodeError("refused")


def assert_decoded_as_through_orjson(sources: list[RunStore], tmp: Path, merged: MergeReport
                                     ) -> None:
    """The merge with every line read by orjson and ``adopt`` (msgspec refusing each): the
    same record, byte for byte, plan and shared values included; the same verdicts and the
    same table from what it hands on."""
    with mock.patch.object(store_module, "DECODER", _Refusing()):
        lines = merge_runs(sources, tmp / "lines", run_id="merged", warn=lambda _: None)
    assert lines.cells == merged.cells
    assert (lines.missing, lines.conflicts) == (merged.missing, merged.conflicts)
    for name in ("results.jsonl", "shared.jsonl", "plan.json", "cases.json"):
        one, other = merged.store.run_dir / name, lines.store.run_dir / name
        assert (one.read_bytes() if one.exists() else None) == (
            other.read_bytes() if other.exists() else None), name
    made = merged.written
    assert [[getattr(r, f) for f in JUDGED] for r in lines.written] == [
        [getattr(r, f) for f in JUDGED] for r in made]
    rules = [Rule(outcomes=frozenset({Outcome.FAIL}), why="known", case="case::v1"),
             Rule(outcomes=frozenset({Outcome.NOT_RUN}), why="no GPU", reason="GPU")]
    assert judged_summary(lines.written, rules, limit=3) == judged_summary(made, rules, limit=3)
    # The table from what it hands on: as from the record.
    assert_table_as_from_the_record(lines)


def test_a_merge_equals_the_merge_through_full_decoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/3", CELLS[:6])
    two = shard(reports, "shard-2", "2/3", CELLS[6:])
    again = shard(reports, "shard-2-again", "2/3", CELLS[6:])  # the job re-run
    record(one, result(CELLS[0], "shard-1", Outcome.PASS))
    record(one, result(CELLS[1], "shard-1", Outcome.FAIL, finished_at=2.0))
    record(one, result(CELLS[1], "shard-1", Outcome.PASS, attempt=2, finished_at=3.0))
    record(one, result(CELLS[2], "shard-1", Outcome.NOT_RUN, reason="no GPU here"))
    record(one, result(CELLS[3], "shard-1", Outcome.ERROR, infra=True, finished_at=9.0))
    record(one, result(CELLS[4], "shard-1", Outcome.PASS, hardware=MACHINES[1]))
    record(one, result(CELLS[5], "shard-1", Outcome.PASS, log="never shipped"), log=False)
    lost = one.run_dir / "logs" / f"{CELLS[4]['cell_id']}.log"
    lost.unlink()  # the artifact came without this log
    record(two, result(CELLS[2], "shard-2", Outcome.PASS, finished_at=5.0))  # over NOT_RUN
    record(two, result(CELLS[3], "shard-2", Outcome.PASS))  # over a lost machine
    record(two, result(CELLS[6], "shard-2", Outcome.FAIL))
    record(two, result(CELLS[7], "shard-2", Outcome.FAIL))
    record(two, result(CELLS[8], "shard-2", Outcome.MISSING))  # a gap from an earlier merge
    record(two, result({**CELLS[9], "cell_id": "x99"}, "shard-2", Outcome.PASS,  # no plan
                       reason="token hunter2-secret"))  # a secret of the merging machine's
    record(two, result({**CELLS[9], "cell_id": "x98"}, "shard-2", Outcome.PASS,  # ... in a
                       hardware={"cpu": "hunter2-secret", "cpus": 1}))  # machine's value
    record(again, result(CELLS[7], "shard-2-again", Outcome.PASS, attempt=2))
    record(again, result(CELLS[6], "shard-2-again", Outcome.FAIL))  # a tie: run id decides
    named = rows(again)[0]  # c07's line as the store wrote it: its values named
    line = result(CELLS[9], "shard-2-again", Outcome.SKIP).to_dict()
    add_line(again, {**line, "hardware": MACHINES[1]})  # format 3: its values inline
    add_line(again, {**line, "cell_id": CELLS[10]["cell_id"], "note": "by hand"})  # a key more
    add_line(again, {k: v for k, v in line.items() if k not in ("parent", "gpu", "log")}
             | {"cell_id": CELLS[11]["cell_id"],  # fields too few; a value lost
                "fingerprint": "0123456789abcdef"})
    add_line(again, b'{"run_id": "shard-2-again", "cell_id": "c05", "duration": NaN, ')
    add_line(again, b'\n{"cell_id": "c05", "outcome": "PASS", "duration": NaN}\n')  # no result
    add_line(again, json.dumps({**result(CELLS[0], "shard-2-again", Outcome.FLAKY).to_dict(),
                                "details": {"loss": float("nan")}}).encode() + b"\n")
    elsewhere = tmp_path / "old-logs" / "c08.log"  # format 1: a log by its absolute path
    elsewhere.parent.mkdir()
    elsewhere.write_text("log of c08, moved in")
    add_line(again, {**result(CELLS[8], "shard-2-again", Outcome.PASS, attempt=3).to_dict(),
                     "log": str(elsewhere)})
    add_line(again, {**result(CELLS[11], "shard-2-again", Outcome.PASS, attempt=3).to_dict(),
                     "log": str(tmp_path / "old-logs" / "lost.log")})
    add_line(again, b'{"run_id": "shard-2-again", "cell_id": "c0')  # killed mid-write
    # Lines that name their values, by hand: a field too many, fields too few, a name that
    # is not its value's content (shared.jsonl edited); each as the store would write it.
    add_line(again, {**named, "cell_id": "x97", "note": "by hand"})
    add_line(again, {k: v for k, v in named.items() if k not in ("parent", "gpu")}
             | {"cell_id": "x96"})
    with open(again.run_dir / "shared.jsonl", "a") as fh:
        fh.write(json.dumps(["feedfacefeedface", {"cpu": "renamed"}]) + "\n")
    add_line(again, {**named, "cell_id": "x95", "hardware": "feedfacefeedface"})
    monkeypatch.setenv("DEPLOY_TOKEN", "hunter2-secret")  # set where the merge runs
    sources = [RunStore.open(reports, r) for r in ("shard-1", "shard-2", "shard-2-again")]
    out = assert_merged_as_reference(sources, tmp_path / "first")
    assert "hunter2-secret" not in (out.run_dir / "results.jsonl").read_text()

    # Merged again with a shard: the same records twice are one, without a conflict.
    monkeypatch.delenv("DEPLOY_TOKEN")
    both = [RunStore(out.run_dir), RunStore.open(reports, "shard-2")]
    assert_merged_as_reference(both, tmp_path / "second")


def test_lines_the_store_wrote_are_merged_as_the_shard_wrote_them(tmp_path: Path) -> None:
    """Byte for byte; what the merged record holds otherwise (here: a gap, a lost log, a value
    given inline) is written as the store writes it."""
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/1", CELLS[:5])
    for cell in CELLS[:3]:
        record(one, result(cell, "shard-1", Outcome.PASS))
    record(one, result(CELLS[3], "shard-1", Outcome.PASS, log="gone"), log=False)
    add_line(one, {**result(CELLS[4], "shard-1", Outcome.PASS).to_dict()})  # inline values
    merged = merge_runs([RunStore.open(reports, "shard-1")], tmp_path / "out", run_id="m")
    assert_merged_as_reference([RunStore.open(reports, "shard-1")], tmp_path)
    written = (merged.store.run_dir / "results.jsonl").read_bytes().splitlines()
    source = (one.run_dir / "results.jsonl").read_bytes().splitlines()
    assert written[:3] == source[:3]


OUTCOMES = st.sampled_from([Outcome.PASS, Outcome.FAIL, Outcome.NOT_RUN, Outcome.MISSING,
                            Outcome.ERROR, Outcome.SKIP])
RECORD = st.fixed_dictionaries({
    "outcome": OUTCOMES, "attempt": st.integers(1, 2), "finished_at": st.sampled_from([1.0, 2.0]),
    "infra": st.booleans(), "log": st.booleans(), "machine": st.integers(0, 1),
    "inline": st.booleans()})


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.integers(0, 7), st.lists(RECORD, min_size=1, max_size=2),
                                max_size=6), min_size=1, max_size=3))
def test_any_shards_merge_as_through_full_decoding(tmp_path_factory: pytest.TempPathFactory,
                                                   shards: list[dict[int, list[dict[str, Any]]]]
                                                   ) -> None:
    tmp = tmp_path_factory.mktemp("merge")
    sources = []
    for n, cells in enumerate(shards):
        store = shard(tmp / "shards", f"s{n}", f"{n + 1}/{len(shards)}", CELLS[:8])
        for index, records in cells.items():
            for rec in records:
                res = result(CELLS[index], store.run_id, rec["outcome"], attempt=rec["attempt"],
                             finished_at=rec["finished_at"], infra=rec["infra"],
                             hardware=MACHINES[rec["machine"]])
                if rec["inline"]:
                    add_line(store, res.to_dict())
                else:
                    record(store, res, log=rec["log"])
        sources.append(RunStore(store.run_dir))
    assert_merged_as_reference(sources, tmp)


def test_lines_are_read_as_json_reads_them_and_marked_verbatim_where_exact() -> None:
    """orjson where it reads what json reads; json (and not verbatim) where orjson refuses a
    line that json reads but ``dumps`` would write otherwise: NaN, an infinity, a lone
    surrogate. A line neither reads is left out."""
    exact = [b'{"a": 1, "b": [1.5, "x"]}', b'"just a string"', b"  {}  ", b'{"a": -0.0}']
    other = [b'{"a": NaN}', b'{"a": "\\ud800"}', b'{"a": 1e400}']
    lines = [*exact, b"", *other, b'{"torn": ']
    got = list(jsonio.loads_lines(b"\n".join(lines)))
    assert [line for line, _, _ in got] == exact + other
    for line, value, verbatim in got:
        assert json.dumps(value) == json.dumps(json.loads(line))  # NaN == NaN, as text
        assert verbatim == (line in exact)
    # An integer past 64 bits anywhere (orjson would read a float): the text through json.
    text = b'{"a": 1}\n{"a": 123456789012345678901234567890}'
    assert list(jsonio.loads_lines(text)) == [
        (b'{"a": 1}', {"a": 1}, False),
        (b'{"a": 123456789012345678901234567890}', {"a": 123456789012345678901234567890}, False)]


def test_lines_appended_are_their_concatenation(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    codec.append(path, b"first\n")
    lines = b"".join(f"line {i}\n".encode() * 1000 for i in range(100))  # past a pipe's write
    codec.append(path, lines)
    codec.append(path, b"")
    assert path.read_bytes() == b"first\n" + lines


def test_the_merged_run_holds_the_shards_plan_and_says_where_it_came_from(
        tmp_path: Path) -> None:
    """Its plan (made on the second core while the shards are read): the shards' full plan in
    plan order, plus what an unsharded record planned; run.json counts it and names the
    sources; the cases of every source."""
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/2", CELLS[:6])
    two = shard(reports, "shard-2", "2/2", CELLS[6:])
    extra = {**CELLS[0], "cell_id": "z01", "variant": "v9"}
    rerun = shard(reports, "rerun", None, [extra])
    record(one, result(CELLS[0], "shard-1", Outcome.PASS))
    record(rerun, result(extra, "rerun", Outcome.FAIL))
    merged = merge_runs([one, two, rerun], tmp_path / "out", run_id="merged").store
    assert merged.planned() == [*CELLS, extra]
    meta = merged.meta
    assert meta["cells"] == len(CELLS) + 1 and meta["ordered_cells"] == len(CELLS) + 1
    assert meta["merged_from"] == [{"run_id": "shard-1", "shard": "1/2"},
                                   {"run_id": "shard-2", "shard": "2/2"},
                                   {"run_id": "rerun", "shard": None}]
    assert [r.cell_id for r in merged.results()] == [c["cell_id"] for c in [*CELLS, extra]]


def test_a_plan_that_cannot_be_read_is_said_in_one_line_and_no_run_is_left(
        tmp_path: Path) -> None:
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/2", CELLS[:6])
    two = shard(reports, "shard-2", "2/2", CELLS[6:])
    record(one, result(CELLS[0], "shard-1", Outcome.PASS))
    (one.run_dir / "full_plan.json").write_text('[{"cell')  # the artifact cut short
    with pytest.raises(StoreError, match=r"full_plan\.json: unreadable") as raised:
        merge_runs([one, two], tmp_path / "out", run_id="merged")
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "out" / "runs" / "merged").exists()


def test_a_merge_that_fails_leaves_the_earlier_merge_of_its_name(tmp_path: Path) -> None:
    """A nightly merges into one run id: an artifact that cannot be read that night is said,
    and last night's merge stays as it was (it is replaced only once every plan is read)."""
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/2", CELLS[:6])
    two = shard(reports, "shard-2", "2/2", CELLS[6:])
    record(one, result(CELLS[0], "shard-1", Outcome.PASS))
    first = merge_runs([one, two], tmp_path / "out", run_id="nightly").store
    before = rows(first)
    (two.run_dir / "cases.json").write_text("{")  # cut short
    with pytest.raises(StoreError, match=r"cases\.json: unreadable"):
        merge_runs([one, two], tmp_path / "out", run_id="nightly")
    assert rows(RunStore(first.run_dir)) == before and (first.run_dir / "plan.json").is_file()


def test_a_run_id_that_is_a_path_is_refused_before_anything_is_touched(tmp_path: Path) -> None:
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/1", CELLS)
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "run.json").write_text("{}")
    (tmp_path / "out" / "runs").mkdir(parents=True)  # so that the path leads somewhere
    with pytest.raises(UsageError, match="--run-id"):
        merge_runs([one], tmp_path / "out", run_id="../../elsewhere")
    assert (victim / "run.json").is_file()


def test_a_line_passed_through_without_a_result_is_one_orjson_reads_the_same(
        tmp_path: Path) -> None:
    """Where the merge makes no result of a line (``results=False``), msgspec decodes it only
    as far as it reads it: a line it would pass, where reading it as a result would not keep
    it as it is, still goes that way (the record the same byte for byte): a number past 64
    bits, a lone surrogate or a byte that is not UTF-8 in a field it passes over, a field of
    another type."""
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/2", CELLS[:6])
    two = shard(reports, "shard-2", "2/2", CELLS[6:])
    for cell in CELLS[:2]:
        record(one, result(cell, "shard-1", Outcome.PASS))
    record(two, result(CELLS[6], "shard-2", Outcome.FAIL))
    named = {**rows(one)[0], "log": None}  # as the store writes a line: its values named
    add_line(one, {**named, "cell_id": CELLS[2]["cell_id"], "attempt": "2"})  # a str
    add_line(one, {**named, "cell_id": CELLS[3]["cell_id"], "infra": 0})  # an int
    add_line(one, json.dumps({**named, "cell_id": CELLS[4]["cell_id"], "caveat": "\x7f"})
             .replace("\\u007f", "\\udc80").encode() + b"\n")  # a lone surrogate, escaped
    add_line(two, {**named, "cell_id": CELLS[8]["cell_id"], "details": {"n": 2 ** 70}})
    out = assert_merged_as_reference([RunStore(one.run_dir), RunStore(two.run_dir)], tmp_path)
    kept = {r.cell_id: r for r in out.results()}
    assert kept[CELLS[4]["cell_id"]].caveat == "\udc80"
    assert {c["cell_id"] for c in (CELLS[2], CELLS[3], CELLS[8])} <= kept.keys()
    # A shard without any of those: its lines as the store wrote them are passed through;
    # one whose field is of another type, one naming a value shared.jsonl lacks: results.
    three = shard(tmp_path / "more", "shard-3", "1/1", CELLS[:3])
    for cell in CELLS[:2]:
        record(three, result(cell, "shard-3", Outcome.PASS))
    named = {**rows(three)[0], "log": None}
    add_line(three, {**named, "cell_id": CELLS[2]["cell_id"], "attempt": "2"})
    add_line(three, {**named, "cell_id": CELLS[3]["cell_id"], "hardware": "0123456789abcdef"})
    add_line(three, json.dumps({**named, "cell_id": CELLS[4]["cell_id"], "caveat": "\x7f"})
             .encode().replace(b"\\u007f", b"\xff") + b"\n")  # not UTF-8: no line
    # A number past a double's range: msgspec refuses it where orjson does (json reads it).
    add_line(three, {**named, "cell_id": CELLS[5]["cell_id"], "details": {"loss": 1e300}})
    path = three.run_dir / "results.jsonl"
    path.write_bytes(path.read_bytes().replace(b"1e+300", b"1e400"))
    again = merge_runs([three], tmp_path / "again")
    lines = again.written
    written = (again.store.run_dir / "results.jsonl").read_bytes().split(b"\n")
    assert written[:2] == path.read_bytes().split(b"\n")[:2]  # as the shard wrote them
    assert lines[3].hardware == {} and written[3] != path.read_bytes().split(b"\n")[3]
    assert lines[4].outcome is Outcome.MISSING  # its only line unreadable
    assert isinstance(lines[5], CellResult) and lines[5].details == {"loss": float("inf")}
    assert_merged_as_reference([RunStore(three.run_dir)], tmp_path / "three")


def test_the_shards_plan_is_the_merged_plan_as_it_was_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record a shard of one plan: the merged run's plan.json is the first shard's
    full_plan.json as it is (not decoded and encoded again); it means what ``_full_plan``
    gives. Where that would not be so, the plan is decoded: a cell in it twice (kept once),
    a secret of this machine's in it (redacted)."""
    reports = tmp_path / "shards"
    one = shard(reports, "shard-1", "1/2", CELLS[:6])
    two = shard(reports, "shard-2", "2/2", CELLS[6:])
    text = (one.run_dir / "full_plan.json").read_bytes()
    merged = merge_runs([one, two], tmp_path / "out", run_id="m").store
    assert (merged.run_dir / "plan.json").read_bytes() == text
    assert merged.planned() == _full_plan([one, two], [one.meta, two.meta]) == CELLS
    assert merged.meta["cells"] == len(CELLS)

    twice = json.dumps([*CELLS, CELLS[0]]).encode()
    (one.run_dir / "full_plan.json").write_bytes(twice)
    merged = merge_runs([one, two], tmp_path / "out", run_id="m").store
    assert merged.planned() == CELLS and merged.meta["cells"] == len(CELLS)

    # A value json reads where orjson does not (a number past a double's range): the text
    # kept as it is, read as json reads it.
    (one.run_dir / "full_plan.json").write_bytes(text.replace(b'"hardware":"cpu"',
                                                              b'"hardware":"cpu","t":1e400', 1))
    merged = merge_runs([one, two], tmp_path / "out", run_id="m").store
    assert merged.planned() == _full_plan([one, two], [one.meta, two.meta])
    assert merged.planned()[0]["t"] == float("inf") and merged.planned()[1:] == CELLS[1:]
    # Bytes that are not UTF-8: refused in one line, the earlier merge of the name kept.
    (one.run_dir / "full_plan.json").write_bytes(text.replace(b"t.py", b"t\xff.py", 1))
    with pytest.raises(StoreError, match=r"full_plan\.json: unreadable"):
        merge_runs([one, two], tmp_path / "out", run_id="m")
    assert RunStore(merged.run_dir).planned()[0]["t"] == float("inf")

    secret = [{**CELLS[0], "nodeid": "t.py::test_hunter2-secret"}, *CELLS[1:]]
    (one.run_dir / "full_plan.json").write_text(json.dumps(secret))
    monkeypatch.setenv("DEPLOY_TOKEN", "hunter2-secret")
    merged = merge_runs([one, two], tmp_path / "out", run_id="m").store
    assert b"hunter2" not in (merged.run_dir / "plan.json").read_bytes()
    assert len(merged.planned()) == len(CELLS)


def test_times_past_a_double_s_precision_are_compared_as_written(tmp_path: Path) -> None:
    """Two shards' records of one cell at the same attempt: the later one wins, to the last
    digit of its time, as the record has it (an integer past 2**53 stays an integer)."""
    reports = tmp_path / "shards"
    a = shard(reports, "a", "1/2", CELLS[:1])
    b = shard(reports, "b", "2/2", CELLS[1:])
    record(a, result(CELLS[0], "a", Outcome.PASS))
    record(b, result(CELLS[0], "b", Outcome.FAIL))
    for store, time in ((a, b"9007199254740993"), (b, b"9007199254740992")):
        path = store.run_dir / "results.jsonl"
        path.write_bytes(path.read_bytes().replace(b'"finished_at":1.0', b'"finished_at":' + time))
    out = assert_merged_as_reference([RunStore(a.run_dir), RunStore(b.run_dir)], tmp_path)
    assert out.results()[0].run_id == "a"  # a's is later, by one


def test_a_line_nested_deeper_than_a_writer_goes_is_read_and_refused_in_one_line(
        tmp_path: Path) -> None:
    """orjson reads 1,024 levels; msgspec stops short of that (RecursionError): such a line
    is read as a result, and a merge that would write it again says so in one line."""
    one = shard(tmp_path / "shards", "shard-1", "1/1", CELLS[:2])
    record(one, result(CELLS[0], "shard-1", Outcome.PASS))
    line = json.dumps({**rows(one)[0], "cell_id": CELLS[1]["cell_id"], "log": None,
                       "details": "here"}, separators=(",", ":"))
    add_line(one, line.replace('"here"', "[" * 1015 + "1" + "]" * 1015).encode() + b"\n")
    assert [r.cell_id for r in RunStore(one.run_dir).results()] == [
        c["cell_id"] for c in CELLS[:2]]
    with pytest.raises(StoreError, match="nested too deep") as raised:
        merge_runs([one], tmp_path / "a")
    assert "\n" not in str(raised.value)

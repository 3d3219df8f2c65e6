"""compat.json's results: a table in pandas' "split" layout (the field names once, a row of
values per cell), what cells share written once and every cell read back whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import jsonio
from harness.core.results import LINE, CellResult, Outcome
from harness.records.store import DECODER
from harness.report.longjson import INHERITED, write_long_json
from tests.conftest import examples

FP_A = {"python": "3.11", "torch": {"version": "2.0.0", "cuda_available": False}}
FP_B = {"python": "3.11", "torch": {"version": "2.0.0", "cuda_available": True}}
HW = {"gpus": [], "cpu": "x86_64"}
HW_GPU = {"gpus": [{"name": "A100", "memory": 1e16}], "cpu": "x86_64"}


def read_back(path: Path) -> list[dict[str, Any]]:
    """Each cell as a reader of the file makes it: its row by the columns, a suite's test's
    null columns its session's, a fingerprint or machine it does not keep of its own taken
    from its key's (or empty: it had none)."""
    data = json.loads(path.read_bytes())
    table = data["results"]
    rows = [dict(zip(table["columns"], values, strict=True)) for values in table["data"]]
    sessions = {row["cell_id"]: row for row in rows}
    cells = []
    for cell in rows:
        if cell["parent"] in sessions:
            session = sessions[cell["parent"]]
            cell.update({k: session[k] for k in INHERITED if cell[k] is None})
        if cell["nodeid"] is None:
            cell["nodeid"] = cell["variant"]
        machine = cell["node"] if cell["gpu"] is None else f"{cell['node']}#{cell['gpu']}"
        if cell["fingerprint"] is None:
            cell["fingerprint"] = data["fingerprints"].get(cell["env_key"], {})
        if cell["hardware"] is None:
            cell["hardware"] = data["machines"].get(machine, {})
        cells.append(cell)
    return cells


def as_json(result: CellResult) -> dict[str, Any]:
    """A result as its record's line reads back (every value as JSON gives it)."""
    return json.loads(json.dumps(result.to_dict()))


NUMBER = st.sampled_from([0, 1, 1.5, 19.72, 1795686019.3924308, 1e15, 1e16, 1.5e17, 1e300,
                          -2e20, 5e-324, 2**70])
DETAILS = st.dictionaries(st.sampled_from(["device", "caveat", "n"]),
                          st.one_of(st.text(max_size=4), NUMBER, st.lists(NUMBER, max_size=2)),
                          max_size=2)


@st.composite
def results(draw: st.DrawFn) -> list[CellResult]:
    made = []
    for i in range(draw(st.integers(0, 12))):
        env = draw(st.sampled_from(["k1", "k2"]))
        node = draw(st.sampled_from(["a", "a#1", "b"]))
        made.append(CellResult(
            run_id=draw(st.sampled_from(["r", "r2"])), cell_id=f"c{i}", environment=f"e{env}",
            # a test's values as its session's (an equal object), or not
            values=draw(st.sampled_from([{"torch": "2.0"}, {"torch": "2.1"}, {}])),
            env_key=env, backend="uv", case_id="case", variant="repro",
            nodeid=draw(st.sampled_from(["t.py::t", "repro"])),
            hardware_target="cpu", outcome=draw(st.sampled_from(list(Outcome))),
            reason=draw(st.text(alphabet='ab1e5,]}"\\\né', max_size=6)),
            signature=draw(st.none() | st.just("sig")),
            # the same object, an equal one, another, or none
            fingerprint=draw(st.sampled_from([FP_A, FP_B, {}, COPY])),
            hardware=draw(st.sampled_from([HW, HW_GPU, {}])),
            details=draw(DETAILS), duration=draw(NUMBER), log=None,
            finished_at=draw(NUMBER), node=node,
            gpu=draw(st.none() | st.just(1)) if node == "a" else None,
            # a suite's test: its session's cell id (one before it, or none in the table)
            parent=draw(st.sampled_from(["", "c0", "c1", "gone"])) if i > 1 else ""))
    return [r.replace(fingerprint=json.loads(json.dumps(FP_A))) if r.fingerprint is COPY else r
            for r in made]


COPY: dict[str, Any] = {"copy": "of FP_A"}  # drawn: made an equal copy of FP_A


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results())
def test_every_cell_reads_back_whole_from_the_table(tmp_path: Path,
                                                    cells: list[CellResult]) -> None:
    """Each cell's every field, a suite's test's columns its session's or its own, its
    fingerprint and machine shared or its own (fingerprints
    equal but not the same object, machines whose keys read alike: node "a#1" and node "a"
    on GPU 1), floats past 1e16, integers past 64 bits, texts that look like numbers; from
    results sharing objects and from results decoded line by line (each its own)."""
    want = [as_json(r) for r in cells]
    decoded = [DECODER.decode(jsonio.dumps({name: getattr(r, name) for name in LINE}))
               for r in cells]
    for rows in (cells, decoded):
        path = tmp_path / "compat.json"
        write_long_json(path, {"run_id": "n"}, rows, {"since": None})
        assert read_back(path) == want
        data = json.loads(path.read_bytes())
        assert (data["run_id"], data["since"]) == ("n", None)


def test_field_names_are_written_once_and_pandas_reads_the_table(tmp_path: Path) -> None:
    """A suite's thousands of tests: the names once, each fingerprint and machine once, what a
    test shares with its session written in the session's row alone; pandas fills it back."""
    session = CellResult(
        run_id="r", cell_id="s", environment="e", values={"torch": "2.0"}, env_key="k",
        backend="uv", case_id="suite", variant="(session)", nodeid="suite:suite",
        hardware_target="cpu", outcome=Outcome.PASS, fingerprint=FP_A, hardware=HW, node="n")
    cells = [session, *(session.replace(
        cell_id=f"c{i}", values={"torch": "2.0"}, variant=f"test_m.py::test_{i}",
        nodeid=f"test_m.py::test_{i}", duration=0.01, parent="s")
        for i in range(12000))]  # three blocks of 5,000
    path = tmp_path / "compat.json"
    write_long_json(path, {"run_id": "n"}, cells, {})
    text = path.read_bytes()
    assert text.count(b'"cell_id"') == 1 and text.count(b'"cuda_available"') == 1
    assert text.count(b'"uv"') == 1 and text.count(b'{"torch":"2.0"}') == 1
    assert text.count(b'"test_m.py::test_5"') == 1  # the variant; the node id null
    assert read_back(path) == [as_json(r) for r in cells]
    frame = pd.DataFrame(**json.loads(text)["results"])
    assert len(frame) == 12001 and list(frame["variant"][1:3]) == [
        "test_m.py::test_0", "test_m.py::test_1"]
    assert set(frame["outcome"]) == {"PASS"} and frame["fingerprint"].isna().all()
    sessions = frame.set_index("cell_id")
    for name in INHERITED:  # as docs/report.md shows a reader
        frame[name] = frame[name].fillna(frame["parent"].map(sessions[name]))
    frame["nodeid"] = frame["nodeid"].fillna(frame["variant"])
    assert list(frame["nodeid"][:2]) == ["suite:suite", "test_m.py::test_0"]
    assert set(frame["environment"]) == {"e"} and set(frame["run_id"]) == {"r"}
    assert list(frame["values"][:2]) == [{"torch": "2.0"}] * 2
    # Under three fifths of the bytes of a row of values alone (no name, no shared value).
    values = len(json.dumps([list(as_json(r).values())[:-2] for r in cells],
                            separators=(",", ":")))
    assert len(text) < values * 0.6


def test_values_orjson_refuses_are_written_as_json_writes_them(tmp_path: Path) -> None:
    """A block orjson refuses (an integer past 64 bits, details nested past its 254 levels)
    goes through ``json``; every cell still reads back."""
    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value

    for odd in ({"attempt": 2**64}, {"details": {"n": 2**70}}, {"details": {"x": nested(260)}},
                {"fingerprint": {"x": nested(260)}}):
        cells = [CellResult(**{  # type: ignore[arg-type]
            "run_id": "r", "cell_id": f"c{i}", "environment": "e", "values": {},
            "env_key": "k", "backend": "uv", "case_id": "c", "variant": "v", "nodeid": "t",
            "hardware_target": "cpu", "outcome": Outcome.PASS, "reason": "é",
            "fingerprint": FP_A, "hardware": HW, "node": "n", "duration": 1e-7,
            **(odd if i == 3 else {})}) for i in range(6)]
        path = tmp_path / "compat.json"
        write_long_json(path, {"run_id": "n"}, cells, {"since": None})
        assert read_back(path) == [as_json(r) for r in cells], odd.keys()

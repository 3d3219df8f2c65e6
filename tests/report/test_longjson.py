"""compat.json's results: written by msgspec from rows read straight from the record, the
bytes of each result as a dict written through ``jsonio`` (what the report wrote before)."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import jsonio
from harness.core.results import CellResult, Outcome, as_rows
from harness.records.lines import DECODER
from harness.report.longjson import write_long_json
from tests.conftest import examples

FP_A = {"python": "3.11", "torch": {"version": "2.0.0", "cuda_available": False}}
FP_B = {"python": "3.11", "torch": {"version": "2.0.0", "cuda_available": True}}
HW = {"gpus": [], "cpu": "x86_64"}
HW_GPU = {"gpus": [{"name": "A100", "memory": 1e16}], "cpu": "x86_64"}


def reference(path: Path, results: list[CellResult]) -> bytes:
    """compat.json as the report wrote it before: each result a dict in the record's field
    order, a fingerprint or machine unlike its key's first one kept last."""
    fingerprints: dict[str, Any] = {}
    machines: dict[str, Any] = {}

    def machine(r: CellResult) -> str:
        return r.node if r.gpu is None else f"{r.node}#{r.gpu}"

    for r in results:
        if r.fingerprint:
            fingerprints.setdefault(r.env_key, r.fingerprint)
        if r.hardware:
            machines.setdefault(machine(r), r.hardware)
    rows = []
    for r in results:
        data = {f.name: getattr(r, f.name) for f in fields(CellResult)}
        data["outcome"] = str(r.outcome)
        for name, known in (("fingerprint", fingerprints.get(r.env_key)),
                            ("hardware", machines.get(machine(r)))):
            value = data.pop(name)
            if value and known is not value and known != value:
                data[name] = value
        rows.append(data)
    blocks = [jsonio.dumps(rows[i:i + 5000])[1:-1] for i in range(0, len(rows), 5000)]
    return (jsonio.dumps({"run_id": "n", "fingerprints": fingerprints,
                          "machines": machines})[:-1]
            + b',"results":[' + b",".join(blocks) + b'],"since":null}')  # as write_array


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
            run_id="r", cell_id=f"c{i}", environment=f"e{env}", values={"torch": "2.0"},
            env_key=env, backend="uv", case_id="case", variant="repro", nodeid="t.py::t",
            hardware_target="cpu", outcome=draw(st.sampled_from(list(Outcome))),
            reason=draw(st.text(alphabet='ab1e5,]}"\\\né', max_size=6)),
            signature=draw(st.none() | st.just("sig")),
            # the same object, an equal one, another, or none
            fingerprint=draw(st.sampled_from([FP_A, FP_B, {}, COPY])),
            hardware=draw(st.sampled_from([HW, HW_GPU, {}])),
            details=draw(DETAILS), duration=draw(NUMBER), log=None,
            finished_at=draw(NUMBER), node=node,
            gpu=draw(st.none() | st.just(1)) if node == "a" else None))
    for r in made:
        if r.fingerprint is COPY:
            object.__setattr__(r, "fingerprint", json.loads(json.dumps(FP_A)))
    return made


COPY: dict[str, Any] = {"copy": "of FP_A"}  # drawn: made an equal copy of FP_A


@settings(max_examples=examples(300), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=results())
def test_rows_as_msgspec_writes_them_are_the_dicts_bytes(tmp_path: Path,
                                                         cells: list[CellResult]) -> None:
    """Shared values left out, a cell's own kept last (fingerprints equal but not the same
    object, machines whose keys read alike: node "a#1" and node "a" on GPU 1), floats past
    1e16 anywhere (msgspec writes them otherwise: those blocks go as dicts), integers past
    64 bits, texts that look like numbers; from rows sharing objects (``as_rows``) and from
    rows decoded line by line (each its own)."""
    want = reference(tmp_path / "want.json", cells)
    decoded = [DECODER.decode(jsonio.dumps({f.name: getattr(r, f.name)
                                            for f in fields(CellResult)}))
               for r in cells]
    for rows in (as_rows(cells), decoded):
        for plain in (True, False):
            path = tmp_path / "compat.json"
            write_long_json(path, {"run_id": "n"}, rows, {"since": None}, decoded=plain)
            assert path.read_bytes() == want
            assert json.loads(path.read_bytes())["results"] == json.loads(want)["results"]


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_blocks_orjson_refuses_are_written_as_json_writes_them(tmp_path: Path) -> None:
    """A block orjson refuses (details or a cell's own fingerprint nested past its 254
    levels, where they sit in the block; an integer past 64 bits) is written through
    ``json`` (non-ASCII escaped, ``1e-07``): the blocks around it as they are. 12,001 cells:
    three blocks of 5,000."""
    def cell(i: int, **extra: Any) -> CellResult:
        fields_: dict[str, Any] = {
            "run_id": "r", "cell_id": f"c{i}", "environment": "e", "values": {},
            "env_key": "k", "backend": "uv", "case_id": "c", "variant": "v", "nodeid": "t",
            "hardware_target": "cpu", "outcome": Outcome.PASS, "reason": "é",
            "fingerprint": FP_A, "hardware": HW, "node": "n", "duration": 1e-7}
        return CellResult(**{**fields_, **extra})

    # Nested to both ends of the depths around orjson's limit; integers past 64 bits once.
    odds: list[tuple[dict[str, Any], bool]] = [({"attempt": 2**64}, True),
                                               ({"details": {"n": 2**70}}, True)]
    for depth in (251, 254):
        odds += [({"details": {"x": nested(depth - 1)}}, depth == 254),
                 ({"fingerprint": nested(depth)}, depth == 254),
                 ({"hardware": {"x": nested(depth - 1)}}, depth == 254)]
    for odd, refused in odds:
        cells = [cell(i) for i in range(12001)]
        cells[5003] = cell(5003, **odd)
        want = reference(tmp_path / "want.json", cells)
        decoded = [DECODER.decode(jsonio.dumps({f.name: getattr(r, f.name)
                                                for f in fields(CellResult)}))
                   for r in cells]
        path = tmp_path / "compat.json"
        write_long_json(path, {"run_id": "n"}, decoded, {"since": None}, decoded=True)
        assert path.read_bytes() == want, odd.keys()
        if refused:  # orjson refuses each of these: the block went through json
            assert b"\\u00e9" in want and b'"\xc3\xa9"' in want


def test_the_rows_are_left_as_they_were(tmp_path: Path) -> None:
    """The shared fields are left out while msgspec writes, and put back after."""
    cells = as_rows([CellResult(
        run_id="r", cell_id=f"c{i}", environment="e", values={}, env_key="k", backend="uv",
        case_id="c", variant="v", nodeid="t", hardware_target="cpu", outcome=Outcome.PASS,
        reason="", fingerprint=FP_A if i else FP_B, hardware=HW, node="n") for i in range(3)])
    before = [(r.fingerprint, r.hardware) for r in cells]
    write_long_json(tmp_path / "c.json", {}, cells, {}, decoded=True)
    assert [(r.fingerprint, r.hardware) for r in cells] == before
    assert all(a[0] is r.fingerprint for a, r in zip(before, cells, strict=True))

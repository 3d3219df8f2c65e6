"""compat.json: the long table, what changed, and the cells judged against expectations.

``results`` is in pandas' "split" layout (``pandas.DataFrame(**data["results"])``). A
fingerprint is written once per environment key (``fingerprints``) and a machine once per node
or ``node#gpu`` (``machines``): a cell's own is null where it is its key's. A suite's test
holds null in each column of ``INHERITED`` that is its session's (the row ``parent`` names),
and a cell's ``nodeid`` is null where it is its ``variant`` (a suite's test's node id).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from msgspec.structs import astuple

from harness.core import jsonio
from harness.core.results import CellResult
from harness.records.expect import Judgement

#: The columns of ``results``: a ``CellResult``'s fields, in order.
COLUMNS = CellResult.__struct_fields__
#: The columns a suite's test shares with its session: null where they are the session's.
INHERITED = ("run_id", "environment", "values", "env_key", "backend", "case_id",
             "hardware_target", "node")
_INHERITED = [COLUMNS.index(name) for name in INHERITED]
_VARIANT, _NODEID = COLUMNS.index("variant"), COLUMNS.index("nodeid")


def write_long_json(path: Path, head: dict[str, Any], results: Sequence[CellResult],
                    tail: dict[str, Any]) -> None:
    """``head``, ``fingerprints``, ``machines``, ``results``, then ``tail``; compact, the rows
    a few thousand at a time."""
    fingerprints: dict[str, Any] = {}
    firsts: dict[tuple[str, int | None], Any] = {}  # (node, gpu) -> its first cell's
    for r in results:  # each key's value: its first cell's
        if r.fingerprint:
            fingerprints.setdefault(r.env_key, r.fingerprint)
        if r.hardware:
            firsts.setdefault((r.node, r.gpu), r.hardware)
    machines: dict[str, Any] = {}
    for (node, gpu), hardware in firsts.items():  # in order of their first cells
        machines.setdefault(_machine(node, gpu), hardware)

    parents = {r.parent for r in results} - {""}
    sessions = {r.cell_id: astuple(r) for r in results if r.cell_id in parents}

    def row(r: CellResult) -> list[Any]:
        fingerprint = r.fingerprint if _own(r.fingerprint, fingerprints.get(r.env_key)) else None
        # by its key, as a reader finds it (node "a#1" and node "a" on GPU 1 are one key)
        hardware = r.hardware if _own(r.hardware, machines.get(_machine(r.node, r.gpu))) else None
        values = [*astuple(r)[:-2], fingerprint, hardware]
        if _same(values[_NODEID], values[_VARIANT]):
            values[_NODEID] = None
        session = sessions.get(r.parent) if r.parent else None
        if session is not None:
            for i in _INHERITED:
                if _same(values[i], session[i]):
                    values[i] = None
        return values

    def encode(chunk: list[CellResult]) -> bytes:
        return jsonio.dumps(list(map(row, chunk)))

    with open(path, "wb") as fh:
        fh.write(jsonio.dumps({**head, "fingerprints": fingerprints, "machines": machines})[:-1]
                 + b',"results":{"columns":' + jsonio.dumps(COLUMNS) + b',"data":')
        jsonio.write_array(fh, results, encode)
        fh.write(b"}" + (b"," + jsonio.dumps(tail)[1:] if tail else b"}"))


def _own(value: Any, known: Any) -> bool:
    """Whether a cell writes ``value`` of its own: it is not its key's (``known``; none:
    empty), an empty one included (a reader takes a null for the key's)."""
    return known is not value and value != ({} if known is None else known)


def _same(value: Any, session: Any) -> bool:
    """Whether a test's value reads back as its session's (by its JSON: 1 and 1.0 differ)."""
    if value is session:
        return True
    if value is None or type(value) is not type(session):
        return False
    return value == session if type(value) is str else jsonio.dumps(value) == jsonio.dumps(session)


def _machine(node: str, gpu: int | None) -> str:
    """A cell's key in compat.json's ``machines``."""
    return node if gpu is None else f"{node}#{gpu}"


def expectation(result: CellResult, judged: Judgement) -> dict[str, Any]:
    """A deviation from what was expected, or a failure that was (with why)."""
    return {"environment": result.environment,
            "case": f"{result.case_id}::{result.variant}",
            "hardware": result.hardware_target, "outcome": str(result.outcome),
            "expected": sorted(str(o) for o in judged.expected), "status": judged.status,
            "why": judged.why}

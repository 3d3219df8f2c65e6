"""Outcomes and result records: plain data with to_dict / from_dict."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from operator import attrgetter
from typing import Any, TypeVar

import msgspec


class Outcome(StrEnum):
    PASS = "PASS"
    REPRODUCED = "REPRODUCED"
    FAIL = "FAIL"
    SKIP = "SKIP"
    ERROR = "ERROR"
    TIMEOUT = "TIMEOUT"
    CRASH = "CRASH"
    NOT_RUN = "NOT_RUN"
    MISSING = "MISSING"  # planned, but the shard that should have run it never reported
    FLAKY = "FLAKY"  # failed, then passed when tried again (the environment's `retries:`)

    @property
    def ok(self) -> bool:
        """Outcomes that leave the exit code at 0."""
        return self in (Outcome.PASS, Outcome.REPRODUCED, Outcome.SKIP, Outcome.NOT_RUN,
                        Outcome.FLAKY)

    @property
    def passed(self) -> bool:
        """The case ran to its end as it should: it works, or the documented failure came."""
        return self in (Outcome.PASS, Outcome.REPRODUCED)

    @property
    def failed(self) -> bool:
        """What a retry may change: the case failed or its process died."""
        return self in (Outcome.FAIL, Outcome.ERROR, Outcome.TIMEOUT, Outcome.CRASH)


#: What ``CellResult.versions`` names the freeze hash by (beside the key versions).
FREEZE = "(freeze)"


class CellResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                 gc=False, omit_defaults=True):
    """One attempt at a cell: made by run/, appended to results.jsonl, decoded back by msgspec
    (``DECODER``: its schema checked) or through ``adopt``; ``gc=False``: JSON data, no cycles.
    ``fingerprint`` and ``hardware`` come last: compat.json writes a cell's own after the rest."""

    run_id: str
    cell_id: str
    environment: str
    values: dict[str, str]
    env_key: str
    backend: str
    case_id: str
    variant: str
    nodeid: str
    hardware_target: str
    outcome: Outcome
    reason: str = ""
    signature: str | None = None
    details: Any = {}  # a mapping (a hand-written record's may hold anything)
    duration: int | float = 0.0  # (an integer stays one, as json reads it)
    log: str | None = None  # relative to the run folder ("logs/<cell>.log")
    finished_at: int | float = 0.0
    caveat: str = ""  # why a PASS is not a fix (a workaround that turns FP8 off)
    attempt: int = 1
    node: str = ""  # where it ran: a host name, or a Ray node id
    gpu: int | None = None
    # The machine, not the case, failed (a Ray node died, a container never started): the
    # driver retries the cell, and --resume runs it again.
    infra: bool = False
    # A test of a suite: its session's cell id (plan.suites). "" for every other cell.
    parent: str = ""
    fingerprint: Any = {}  # a mapping (in a line just decoded: its name in shared.jsonl)
    hardware: Any = {}  # as fingerprint

    @property
    def unbuilt(self) -> bool:
        """Its environment never built: ERROR with no fingerprint (nothing was imported)."""
        return self.outcome is Outcome.ERROR and not self.fingerprint

    @property
    def logical_key(self) -> tuple[str, str, str]:
        """What the cell is to a reader, stable across pin changes (``cell_id`` is not)."""
        return logical_key(self.environment, self.case_id, self.variant, self.hardware_target)

    @property
    def versions(self) -> dict[str, str]:
        """What "what changed" compares: its fingerprint's key versions and, as ``FREEZE``,
        its freeze hash."""
        fp = as_mapping(self.fingerprint)
        found = {str(k): str(v) for k, v in as_mapping(fp.get("key")).items()}
        if fp.get("freeze_sha256"):
            found[FREEZE] = str(fp["freeze_sha256"])
        return found

    def replace(self, **changes: Any) -> CellResult:
        return msgspec.structs.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Its line's fields, in the record's order (shallow: the mappings are shared)."""
        data = dict(zip(LINE, _LINE_VALUES(self), strict=True))
        data["outcome"] = str(self.outcome)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        """A record from its line (``data`` is copied, not changed: see ``adopt``)."""
        return adopt(dict(data))


def logical_key(environment: str, case_id: str, variant: str, hardware_target: str
                ) -> tuple[str, str, str]:
    """A cell's logical key (``CellResult.logical_key``), from its fields (a table's row too)."""
    return (environment, f"{case_id}::{variant}", hardware_target)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A part of a record the harness writes as a mapping (a fingerprint, its ``key``), read as
    one: anything else (null, a hand edit's number) says nothing, not failing every reader."""
    return value if isinstance(value, Mapping) else {}


def logical_keys(results: Sequence[CellResult]) -> list[tuple[str, str, str]]:
    """Each result's ``logical_key``, in C (no property call per result)."""
    return list(zip(map(attrgetter("environment"), results), labels(results),
                    map(attrgetter("hardware_target"), results), strict=True))


def labels(results: Sequence[CellResult]) -> list[str]:
    """Each result's ``case::variant`` (its logical key's middle), in C."""
    cases = list(map(attrgetter("case_id"), results))
    variants = list(map(attrgetter("variant"), results))
    if set(map(type, cases)) | set(map(type, variants)) <= {str}:
        return list(map("::".join, zip(cases, variants, strict=True)))
    # a number in a hand-written record, a str subclass given by a caller: as f"" writes it
    return [f"{c}::{v}" for c, v in zip(cases, variants, strict=True)]


AnyResult = TypeVar("AnyResult", bound=CellResult)


def counted(results: Sequence[AnyResult]) -> Sequence[AnyResult]:
    """The results that count as cells (for coverage, judging and the consistency check): a
    suite's session that came back as its tests (``parent``) is those tests, not one cell more."""
    sessions = {r.parent for r in results if r.parent}
    return [r for r in results if r.cell_id not in sessions] if sessions else results


def damage(row: Any) -> str | None:
    """Why a decoded record line is no result as the harness writes it (not an object, a field
    missing or of another type, an unknown outcome); None for a result. Only the scalars are
    checked: the mappings are read through ``as_mapping`` wherever read."""
    if not isinstance(row, dict):
        return "not a result (no JSON object)"
    missing = _REQUIRED - row.keys()
    if missing:
        return f"a result without {', '.join(sorted(missing))}"
    for name, kinds, what in _SCALARS:
        if name not in row:  # (an optional field: its default)
            continue
        value = row[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return f"{name} is {_shown(value)}, not {what}"
    if row["outcome"] not in _OUTCOMES:
        return f"outcome {_shown(row['outcome'])} is none the harness knows"
    return None


def _shown(value: Any) -> str:
    """A value as a warning quotes it (its JSON, cut short)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def adopt(row: dict[str, Any]) -> CellResult:
    """A decoded line (changed in place) as a result: unknown keys dropped, defaults filled,
    axis values text (as the table reads them). A KeyError where the row is no result (its
    words: ``damage``'s)."""
    found = damage(row)
    if found is not None:
        raise KeyError(found)
    for name in row.keys() - FIELDS:
        del row[name]
    row["outcome"] = _OUTCOMES[row["outcome"]]
    row["values"] = {str(k): str(v) for k, v in as_mapping(row["values"]).items()}
    return CellResult(**row)


_STRUCT_FIELDS = msgspec.structs.fields(CellResult)
#: The fields of a result's line, in the order the record writes them.
LINE = ("run_id", "cell_id", "environment", "values", "env_key", "backend", "case_id", "variant",
        "nodeid", "hardware_target", "outcome", "reason", "signature", "fingerprint",
        "hardware", "details", "duration", "log", "finished_at", "caveat", "attempt", "node",
        "gpu", "infra", "parent")
_LINE_VALUES = attrgetter(*LINE)
#: The fields a result line the harness writes holds, no more and no fewer.
FIELDS = frozenset(LINE)
_REQUIRED = frozenset(f.name for f in _STRUCT_FIELDS if f.required)
_OUTCOMES = {str(o): o for o in Outcome}
#: The scalar fields as ``damage`` checks them: name, the types taken (a bool is no number, as
#: msgspec reads one), what they are called.
_SCALARS = tuple(
    [(f.name, (str,), "text") for f in _STRUCT_FIELDS if f.type is str]
    + [(name, (str, type(None)), "text or null") for name in ("signature", "log")]
    + [(name, (int, float), "a number") for name in ("duration", "finished_at")]
    + [("attempt", (int,), "a whole number"), ("gpu", (int, type(None)), "a whole number or null"),
       ("infra", (bool,), "true or false"), ("outcome", (str,), "text")])


@dataclass(frozen=True, kw_only=True)
class CellRun:
    """What running a cell produced, to be recorded by whoever asked for it."""

    result: CellResult
    log: bytes = b""
    log_name: str | None = None  # the log file's stem in the run folder (cells of one process
    # share one); None: the cell id
    events: tuple[dict[str, Any], ...] = ()
    fingerprint: dict[str, Any] = field(default_factory=dict)
    env_built: bool | None = None  # None: the environment could not be realized
    # A test suite's session: one run per test, recorded before the session's own result.
    children: tuple[CellRun, ...] = ()

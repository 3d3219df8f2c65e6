"""Outcomes and result records: plain data with to_dict / from_dict."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from itertools import starmap
from operator import attrgetter, itemgetter
from typing import Any, Protocol, TypeVar

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


@dataclass(frozen=True, kw_only=True)
class CellResult:
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
    fingerprint: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    log: str | None = None  # relative to the run folder ("logs/<cell>.log")
    finished_at: float = 0.0
    caveat: str = ""  # why a PASS is not a fix (a workaround that turns FP8 off)
    attempt: int = 1
    node: str = ""  # where it ran: a host name, or a Ray node id
    gpu: int | None = None
    # The machine, not the case, failed (a Ray node died, a container never started, the
    # Docker API timed out): the driver retries the cell, and --resume runs it again.
    infra: bool = False
    # A test of a suite: its session's cell id (plan.suites). "" for every other cell.
    parent: str = ""

    @property
    def unbuilt(self) -> bool:
        """Its environment never built: ERROR with no fingerprint (nothing was imported)."""
        return unbuilt(self.outcome, self.fingerprint)

    @property
    def logical_key(self) -> tuple[str, str, str]:
        """What the cell is to a reader, stable across pin changes: environment name,
        ``case::variant``, hardware target. The content key (``cell_id``) changes with pins."""
        return logical_key(self.environment, self.case_id, self.variant, self.hardware_target)

    def to_dict(self) -> dict[str, Any]:
        # Shallow: the nested dicts are plain JSON data, shared, not deep-copied. The
        # instance's dict holds the fields and nothing else (``adopt`` keeps it so).
        data = dict(self.__dict__)
        data["outcome"] = str(self.outcome)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        """A record from its line (``data`` is copied, not kept: see ``adopt``)."""
        return adopt(dict(data))


class ResultRow(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A result as a row: for code that reads many results many times over (the
    site's model), and the form a result line is decoded into without a ``CellResult``
    (``records.lines``: msgspec, straight from the line). An attribute of a ``CellResult`` is
    a lookup in its own dict, one of 100,000 spread over the heap; a row's are slots, and
    rows are made together. The same fields as ``CellResult`` (``fingerprint`` and
    ``hardware`` last); made from results by ``as_rows``.

    Decoded from a line, it requires every field a result has and allows no other, so a
    line it takes holds what ``adopt`` would keep, no more and no less. Every field is typed
    as the harness writes it and decoded (none skipped as raw text), so msgspec refuses what
    orjson refuses (bytes that are not UTF-8, a lone surrogate, NaN, a number out of a
    double's range) and reads what it takes as json does (``int | float``: an integer stays
    one, of any length). ``fingerprint`` and ``hardware`` are then the names of values in
    shared.jsonl (or the values), until the reader puts the values in place.

    ``gc=False``: a row holds JSON data only, never in a reference cycle, so the cyclic
    collector does not walk the 100,000 of a merge or a report again and again."""

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
    reason: str
    signature: str | None
    details: Any  # a mapping (a hand-written record's may hold anything)
    duration: int | float
    log: str | None
    finished_at: int | float
    caveat: str
    attempt: int
    node: str
    gpu: int | None
    infra: bool
    parent: str
    # Last (CellResult has them after signature): compat.json writes a cell's own
    # fingerprint or machine after its other fields, and writes rows as they are.
    fingerprint: Any  # a mapping (in a line just decoded: its name in shared.jsonl, or it)
    hardware: Any  # as fingerprint

    @property
    def unbuilt(self) -> bool:
        """As ``CellResult.unbuilt``."""
        return unbuilt(self.outcome, self.fingerprint)

    @property
    def logical_key(self) -> tuple[str, str, str]:
        """As ``CellResult.logical_key``."""
        return logical_key(self.environment, self.case_id, self.variant, self.hardware_target)


def logical_key(environment: str, case_id: str, variant: str, hardware_target: str
                ) -> tuple[str, str, str]:
    """A cell's logical key (``CellResult.logical_key``), from its fields: every form of a
    result (the record's, ``ResultRow``, a table's row) makes it here."""
    return (environment, f"{case_id}::{variant}", hardware_target)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A part of a record that the harness writes as a mapping (a fingerprint, its ``key``
    versions, its ``torch``), read as one: anything else (null, or a number or a list a
    hand edit left there) says nothing, rather than failing every reader of the run."""
    return value if isinstance(value, Mapping) else {}


def logical_keys(results: Sequence[Keyed]) -> list[tuple[str, str, str]]:
    """Each result's ``logical_key``, in C (no property call per result)."""
    return list(zip(map(attrgetter("environment"), results), labels(results),
                    map(attrgetter("hardware_target"), results), strict=True))


def labels(results: Sequence[Keyed]) -> list[str]:
    """Each result's ``case::variant`` (its logical key's middle), in C."""
    cases = list(map(attrgetter("case_id"), results))
    variants = list(map(attrgetter("variant"), results))
    if set(map(type, cases)) | set(map(type, variants)) <= {str}:
        return list(map("::".join, zip(cases, variants, strict=True)))
    # a number in a hand-written record, a str subclass given by a caller: as f"" writes it
    return [f"{c}::{v}" for c, v in zip(cases, variants, strict=True)]


def unbuilt(outcome: Outcome, fingerprint: dict[str, Any]) -> bool:
    """ERROR with no fingerprint: the environment never built (``CellResult.unbuilt``)."""
    return outcome is Outcome.ERROR and not fingerprint


#: A result, in either form (for code that reads both: the site's model, the counts).
ResultLike = CellResult | ResultRow


class Keyed(Protocol):
    """A result in any of its forms (``CellResult``, ``ResultRow``, a table's row, a line
    a merge passes through without making a result of it), as far as every reader of one
    reads it: what its logical key is made of. Readers' protocols add what each reads."""

    @property
    def environment(self) -> str: ...
    @property
    def case_id(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def hardware_target(self) -> str: ...


class Judged(Keyed, Protocol):
    """What counting a run's cells and judging them read of a result."""

    @property
    def cell_id(self) -> str: ...
    @property
    def parent(self) -> str: ...
    @property
    def outcome(self) -> Outcome: ...
    @property
    def reason(self) -> str: ...
    @property
    def logical_key(self) -> tuple[str, str, str]: ...


AnyResult = TypeVar("AnyResult", bound=Judged)


def as_rows(results: Iterable[CellResult]) -> list[ResultRow]:
    """``results`` as ``ResultRow``s, in one pass (the site's model reads each cell many
    times, and a row's fields are cheaper to read than a dataclass's)."""
    return list(starmap(ResultRow, map(_ROW_FIELDS, results)))


def counted(results: Sequence[AnyResult]) -> Sequence[AnyResult]:
    """The results that count as cells: a suite's session that came back as its tests
    (``parent``) is those tests, not one cell more. The coverage line, the judging and the
    consistency check all count this way."""
    sessions = {r.parent for r in results if r.parent}
    return [r for r in results if r.cell_id not in sessions] if sessions else results


class DamagedLineError(KeyError):
    """A record's line that is no result as the harness writes it (``why``: ``damage``'s
    words)."""

    @property
    def why(self) -> str:
        return str(self.args[0])


def damage(row: Any) -> str | None:
    """What makes a decoded record line no result as the harness writes it: not an object,
    a required field missing, a field of another type (a number where text belongs, text
    where a number does), an outcome the harness does not know; None for a result. The
    mappings (values, details, fingerprint, hardware) are read as mappings wherever read
    (``as_mapping``), so only the scalars are checked."""
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


def _plain(row: dict[str, Any]) -> bool:
    """Whether a row with every field holds each as the harness writes it (``damage``'s
    checks, in C where it can: a type a field)."""
    return (set(map(type, _TEXTS(row))) == _STR and row["outcome"] in _OUTCOMES
            and type(row["duration"]) in _NUMBER and type(row["finished_at"]) in _NUMBER
            and type(row["attempt"]) is int and type(row["infra"]) is bool
            and type(row["signature"]) in _OPTIONAL and type(row["log"]) in _OPTIONAL
            and type(row["gpu"]) in _INT_OR_NONE)


def adopt(row: dict[str, Any]) -> CellResult:
    """A record that takes ``row`` itself as the instance's ``__dict__`` (filled with the
    defaults, stripped of unknown keys): what the frozen ``__init__`` would do field by field
    through ``object.__setattr__``, at five times the cost, and for dicts decoded from a record
    and used for nothing else one dict per result instead of two. ``DamagedLineError`` where the
    row is no result (``damage``)."""
    # A line the harness wrote holds every field and no other, each of its type: nothing
    # to add or drop, its types checked at once.
    if row.keys() != FIELDS or not _plain(row):
        found = damage(row)
        if found is not None:
            raise DamagedLineError(found)
        if not row.keys() <= FIELDS:
            for name in row.keys() - FIELDS:
                del row[name]
        for name, value in _DEFAULTS.items():
            if name not in row:
                row[name] = value
        for name in _FACTORIES:
            if name not in row:
                row[name] = {}
    row["outcome"] = _OUTCOMES[row["outcome"]]
    obj = object.__new__(CellResult)
    object.__setattr__(obj, "__dict__", row)
    return obj


_FIELDS = tuple(f.name for f in fields(CellResult))
_ROW_FIELDS = attrgetter(*ResultRow.__struct_fields__)  # a result's fields in a row's order
#: The fields a result line the harness writes holds, no more and no fewer.
FIELDS = frozenset(_FIELDS)
_REQUIRED = frozenset(f.name for f in fields(CellResult)
                      if f.default is MISSING and f.default_factory is MISSING)
_DEFAULTS = {f.name: f.default for f in fields(CellResult) if f.default is not MISSING}
_FACTORIES = tuple(f.name for f in fields(CellResult) if f.default_factory is not MISSING)
_OUTCOMES = {str(o): o for o in Outcome}
_STR = {str}
_NUMBER = (int, float)  # (not bool: a number, as msgspec reads one)
_OPTIONAL = (str, type(None))
_INT_OR_NONE = (int, type(None))
#: The scalar fields as ``damage`` checks them: name, the types taken, what they are called.
_SCALARS = tuple(
    [(f.name, (str,), "text") for f in fields(CellResult) if f.type == "str"]
    + [(name, _OPTIONAL, "text or null") for name in ("signature", "log")]
    + [(name, _NUMBER, "a number") for name in ("duration", "finished_at")]
    + [("attempt", (int,), "a whole number"), ("gpu", _INT_OR_NONE, "a whole number or null"),
       ("infra", (bool,), "true or false"), ("outcome", (str,), "text")])
_TEXTS = itemgetter(*(name for name, kinds, _ in _SCALARS if kinds == (str,)
                      and name != "outcome"))


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

"""The shapes readers rely on in a run folder's JSON files (run.json, cases.json, plan.json),
checked with msgspec: a file of another shape is one StoreError naming the file and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Required, TypedDict

import msgspec

from harness.core.errors import StoreError
from harness.core.results import Outcome

#: What a run was for (run.json ``kind``): a scheduled run of the matrix, a bisect's probe, a
#: ``--set`` bump. Records written before it read as nightly.
Kind = Literal["nightly", "trial", "bump"]


def checked(path: Path, data: Any, schema: Any) -> Any:
    """``data``, read from ``path``, as it is, if ``schema`` takes it; else a StoreError."""
    try:
        msgspec.convert(data, schema)
    except msgspec.ValidationError as exc:
        raise StoreError(refused(path, exc)) from None
    return data


def refused(path: Path, exc: msgspec.ValidationError) -> str:
    """msgspec's "Expected `str`, got `int` - at `$[2].case`" as "PATH: [2].case: Expected..."."""
    why, _, field = str(exc).partition(" - at `$")
    return f"{path}: {field[:-1].lstrip('.')}: {why}" if field else f"{path}: {why}"


class Planned(TypedDict, total=False):
    """A cell of plan.json (``Cell.to_dict``), as far as readers rely on its types."""

    cell_id: Required[str]
    environment: Required[str]
    case: Required[str]
    variant: Required[str]
    hardware: Required[str]
    values: dict[str, Any]
    backend: str
    nodeid: str


class Signature(TypedDict, total=False):
    name: Required[str]


class Case(TypedDict, total=False):
    """A variant's entry in cases.json, as far as readers rely on its types."""

    case: Required[str]
    variant: Required[str]
    title: str
    failure: str
    upstream: list[str]
    signatures: list[Signature]
    caveats: list[str]
    about: list[str]
    suite: dict[str, Any]


PLAN_CELLS = list[Planned]
CASES_SCHEMA = dict[str, Case]


class Env(TypedDict, total=False):
    requirements: list[str]


class Rule(TypedDict, total=False):
    """An ``expect:`` rule as run.json keeps it (``Rule.to_dict``)."""

    outcome: Required[list[Outcome]]
    why: Required[str]
    environment: str
    case: str
    hardware: str
    reason: str | None


LAST_SECOND = 253402300799  # 9999-12-31 23:59:59 UTC: the last time a date is written for


class Meta(msgspec.Struct, rename={"version": "format", "sets": "set"}):
    """The fields of run.json whose types readers rely on (the others they read as text)."""

    version: Annotated[int, msgspec.Meta(ge=1)] | None = None
    created: Annotated[float, msgspec.Meta(ge=0, le=LAST_SECOND)] | None = None
    damaged_lines: Annotated[int, msgspec.Meta(ge=0)] | None = None
    kind: Kind | None = None
    shard: str | None = None
    filters: dict[str, Any] | None = None
    sets: dict[str, Any] | None = None
    environments: dict[str, Env] | None = None
    expect: list[Rule] | None = None
    releases: list[dict[str, Any]] | None = None

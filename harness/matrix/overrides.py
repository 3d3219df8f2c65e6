"""``--set KEY=VALUE``: a bump applied to the parsed YAML, so checked as if written there. A key
the matrix names is replaced where it is; one it names nowhere is added to every environment."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness.core.errors import UsageError
from harness.core.matrix import is_pin, requirement_for
from harness.core.releases import in_force, parsed, release_order
from harness.matrix.releases import query_at, valid_specifier

#: Settings ``--set`` may change: those that identify a combination.
SETTABLE = ("backend", "python", "cuda", "image")
_KEY = re.compile(r"[A-Za-z_][\w.-]*")


def parse_sets(texts: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["torch=2.6.0", "te=2.8.0,flash_attn=*"]`` -> pairs, each checked (one line each)."""
    out: dict[str, str] = {}
    for text in texts:
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not _KEY.fullmatch(key) or not value:
                raise UsageError(f"--set {part}: expected KEY=VALUE, like torch=2.6.0")
            if key not in SETTABLE and not is_pin(key, value):
                raise UsageError(f"--set {part}: {value!r} is not a version, a specifier, "
                                 "'*' or a URL")
            out[key] = value
    return tuple(out.items())


def apply_sets(data: Any, sets: tuple[tuple[str, str], ...]) -> list[str]:
    """Change ``data`` (matrix.yaml as parsed) in place; one line per key, saying where."""
    if not isinstance(data, dict):
        return []
    notes = []
    # A distribution's own name stands for the axis named after it (transformer-engine: te).
    aliases = {}
    for axis, dist in _mapping(data.get("distributions")).items():
        try:
            aliases[canonicalize_name(Requirement(str(dist)).name)] = str(axis)
        except InvalidRequirement:
            continue  # the loader says what is wrong with it, at its line
    for given, value in sets:
        key = aliases.get(canonicalize_name(given), given)
        where = _replace(data, key, value)
        if where:
            notes.append(f"--set {given}={value}: replaced in {', '.join(where)}")
        else:
            _add(data, key, value)
            notes.append(f"--set {given}={value}: named nowhere in the matrix; added to every "
                         "environment")
    return notes


def in_use(note: str, origins: set[str]) -> str:
    """A note of ``apply_sets`` naming only the places among ``origins``; "" when none."""
    head, sep, places = note.partition(": replaced in ")
    if not sep:
        return note
    kept = [p for p in places.split(", ") if p in origins or p == "defaults"]
    return f"{head}{sep}{', '.join(kept)}" if kept else ""


def _replace(data: dict[str, Any], key: str, value: str) -> list[str]:
    where = ["defaults"] if _set_in(_mapping(data.get("defaults")), key, value) else []
    where += [f"matrices.{name}" for name, matrix in _mapping(data.get("matrices")).items()
              if _replace_in_matrix(_mapping(matrix), key, value)]
    for name, env in _mapping(data.get("environments")).items():
        pins = _mapping(_mapping(env).get("pins"))
        if key in pins:
            pins[key] = value
        if _set_in(_mapping(env), key, value) or key in pins:
            where.append(f"environments.{name}")
    return where


def _set_in(holder: dict[str, Any], key: str, value: str) -> bool:
    """Replace ``key`` in ``holder`` and in its ``packages:``; whether it was in either."""
    packages = holder["packages"] if isinstance(holder.get("packages"), list) else []
    hit = key in holder
    for i, line in enumerate(packages):
        try:
            name = canonicalize_name(Requirement(str(line)).name)
        except InvalidRequirement:
            continue  # the loader says what is wrong with it, at its line
        if name == canonicalize_name(key):
            packages[i] = requirement_for(key, value)
            hit = True
    if key in holder:
        holder[key] = value
    return hit


def _replace_in_matrix(matrix: dict[str, Any], key: str, value: str) -> bool:
    hit = _set_in(matrix, key, value)
    axes = _mapping(matrix.get("axes"))
    for axis, values in list(axes.items()):
        at = query_at(axis, values)
        query = _mapping(values if at == () else values[at[0]] if at else None)
        if axis == key:
            axes[axis] = [_row_for(values, query, key, value)]
            hit = True
            continue
        if isinstance(values, list) and _set_named(values, key, value):
            # once each, in order: linked rows that became equal
            axes[axis] = list({json.dumps(v, sort_keys=True, default=str): v
                               for v in values}.values())
            hit = True
        hit = _set_named(_mapping(query.get("when")).values(), key, value) or hit  # when: pins
    include = matrix.get("include")  # not a list: the loader says so, at its line
    return _set_named(include if isinstance(include, list) else [], key, value) or hit


def _set_named(items: Iterable[Any], key: str, value: str) -> bool:
    """Set ``key`` in each mapping among ``items`` that names it; whether one did."""
    named = [item for item in items if isinstance(item, dict) and key in item]
    for item in named:
        item[key] = value
    return bool(named)


def _row_for(values: Any, query: dict[str, Any], key: str, value: str) -> Any:
    """What an axis named for ``key`` becomes: the value with its query's when: pins, else the
    linked row in force with the key set, else the value."""
    rows = [v for v in values if isinstance(v, dict) and key in v] if isinstance(
        values, list) else []
    newest = max((release_order(str(r[key])) for r in rows), default=None)
    version = parsed(value.lstrip("="))
    if query and version is not None and (newest is None or release_order(value) > newest):
        for spec, pins in _mapping(query.get("when")).items():
            if isinstance(pins, dict) and valid_specifier(str(spec)) and SpecifierSet(
                    str(spec)).contains(version, prereleases=True):
                return {key: value, **pins}
    if rows:
        row = dict(in_force(rows, value, lambda v: str(v[key])))
        row[key] = value
        return row
    return value


def _add(data: dict[str, Any], key: str, value: str) -> None:
    for matrix in _mapping(data.get("matrices")).values():
        if isinstance(matrix, dict) and isinstance(matrix.get("axes"), dict):
            matrix["axes"][key] = [value]
    for env in _mapping(data.get("environments")).values():
        if isinstance(env, dict) and isinstance(env.setdefault("pins", {}), dict):
            env["pins"][key] = value  # not a mapping: the loader says so, at its line


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


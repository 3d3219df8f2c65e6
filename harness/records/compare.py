"""Which record of a cell counts when several runs hold one (shards, retries, resumes), and
which cell of an earlier run a cell is compared with ("what changed", a bump's report)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.core.errors import UsageError
from harness.core.releases import in_force
from harness.core.results import CellResult, Outcome
from harness.records.store import RunStore
from harness.records.table import Key


def choose_records(sources: Sequence[RunStore],
                   warn: Callable[[str], None] = lambda _: None
                   ) -> tuple[dict[str, tuple[RunStore, CellResult]], list[str]]:
    """Each cell's record across several runs: a real record over a MISSING gap, a case's
    result over a lost machine, then the later attempt, then the later time. Two different
    real records of one cell are a conflict: said through ``warn`` and returned."""
    chosen: dict[str, tuple[RunStore, CellResult]] = {}
    conflicts: list[str] = []
    for source in sources:
        for result in source.results():
            seen = chosen.get(result.cell_id)
            if seen is None:
                chosen[result.cell_id] = (source, result)
                continue
            if seen[1].to_dict() == result.to_dict():
                continue  # the same record twice (a merge merged again)
            later = max((seen, (source, result)), key=_rank)
            chosen[result.cell_id] = later
            if Outcome.MISSING in (seen[1].outcome, result.outcome):
                continue  # a gap filled, not a conflict
            message = (f"{result.environment} {result.case_id}::{result.variant} "
                       f"@{result.hardware_target}: in {seen[0].run_id} and {source.run_id}; "
                       f"kept {later[0].run_id} ({later[1].outcome})")
            conflicts.append(message)
            warn(message)
    if len({s.meta.get("matrix_sha256") for s in sources}) > 1:
        _one_cell_per_key(chosen)
    return chosen, conflicts


def _one_cell_per_key(chosen: Mapping[str, tuple[RunStore, CellResult]]) -> None:
    """Refuses runs of different matrices that ran one logical cell as two (its environment
    changed between them): counted twice, its verdict would say it both works and fails."""
    seen: dict[Key, str] = {}
    for source, result in chosen.values():
        other = seen.setdefault(result.logical_key, source.run_id)
        if other != source.run_id:
            raise UsageError(
                f"{other} and {source.run_id} ran {result.environment} {result.case_id}::"
                f"{result.variant} @{result.hardware_target} as two cells (their matrices "
                "differ): merge the shards of one run; compare two runs with report --diff")


def _rank(pair: tuple[RunStore, CellResult]) -> tuple[bool, bool, int, float, str]:
    source, result = pair
    return (result.outcome is not Outcome.MISSING, not result.infra, result.attempt,
            result.finished_at, source.run_id)


def match_previous(old: Sequence[CellResult], new: Sequence[CellResult],
                   moved: Sequence[str] = ()) -> dict[Key, CellResult]:
    """The cell of ``old`` each cell of ``new`` is compared with, by the new cell's logical
    key: the cell with the same key; or, for the keys a ``--set`` bump replaced (``moved``),
    the cell whose environment differs only in those (of several, the one in force)."""
    if not moved:
        return {r.logical_key: r for r in old}

    def neutral(r: CellResult) -> tuple[Any, ...]:
        rest = tuple(sorted((k, v) for k, v in r.values.items() if k not in moved))
        return (r.environment.split(":", 1)[0], rest, r.case_id, r.variant, r.hardware_target)

    candidates: dict[tuple[Any, ...], list[CellResult]] = {}
    for r in old:
        candidates.setdefault(neutral(r), []).append(r)
    out: dict[Key, CellResult] = {}
    for cell in new:
        found = candidates.get(neutral(cell))
        if found:
            # Several keys moved: the first decides (a bump of one is the common case).
            out[cell.logical_key] = in_force(found, cell.values.get(moved[0], ""),
                                             lambda c: c.values.get(moved[0], ""))
    return out


def bumped(metas: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The keys the runs' ``--set`` replaced (their records' ``set``), in order."""
    keys: dict[str, None] = {}
    for meta in metas:
        keys.update(dict.fromkeys(meta.get("set") or {}))
    return tuple(keys)


def new_releases(now: Mapping[str, Any], before: Mapping[str, Any] | None
                 ) -> list[tuple[str, str]]:
    """(distribution, version) that a run's release queries took and the run before's did
    not: a release that came out since."""
    seen: dict[tuple[str, str], set[str]] = {}
    for entry in (before or {}).get("releases") or []:
        seen.setdefault((entry["text"], entry["python"]), set()).update(entry["versions"])
    out: dict[tuple[str, str], None] = {}
    for entry in now.get("releases") or []:
        old = seen.get((entry["text"], entry["python"]))
        if old is None:
            continue  # a query the run before did not have: nothing came, it is new itself
        for version in entry["versions"]:
            if version not in old:
                out[(entry["query"]["dist"], version)] = None
    return list(out)


def pinned_releases(environments: Mapping[str, Mapping[str, Any]]
                    ) -> dict[str, set[tuple[str, str]]]:
    """Each environment's exact pins, (distribution, version), from its requirements: which
    cells a new release is in."""
    out: dict[str, set[tuple[str, str]]] = {}
    for name, env in environments.items():
        pins = out.setdefault(name, set())
        for text in env.get("requirements") or ():
            try:
                req = Requirement(str(text))
            except InvalidRequirement:
                continue
            specs = list(req.specifier)
            if len(specs) == 1 and specs[0].operator in ("==", "==="):
                pins.add((canonicalize_name(req.name), specs[0].version))
    return out

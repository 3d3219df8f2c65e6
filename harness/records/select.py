"""Which record of a cell counts, when several runs (shards, retries, resumes) hold one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from harness.core.results import CellResult, Outcome
from harness.records.store import RunStore


def choose_records(sources: Sequence[RunStore],
                   warn: Callable[[str], None] = lambda _: None
                   ) -> tuple[dict[str, tuple[RunStore, CellResult]], list[str]]:
    """Each cell's record across several runs: a real record over a MISSING gap, a case's
    result over a lost machine, then the later attempt, then the later time. Two different
    real records of one cell are a conflict: said through ``warn`` and returned."""
    return choose([(source, source.results()) for source in sources], warn)


S = TypeVar("S", bound=RunStore)


def choose(sources: Sequence[tuple[S, Sequence[CellResult]]],
           warn: Callable[[str], None] = lambda _: None
           ) -> tuple[dict[str, tuple[S, CellResult]], list[str]]:
    """``choose_records`` over each source's records as given."""
    chosen: dict[str, tuple[S, CellResult]] = {}
    conflicts: list[str] = []
    for source, results in sources:
        for result in results:
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
    return chosen, conflicts


def _rank(pair: tuple[RunStore, CellResult]) -> tuple[bool, bool, int, float, str]:
    source, result = pair
    return (result.outcome is not Outcome.MISSING, not result.infra, result.attempt,
            result.finished_at, source.run_id)


def merged_cases(stores: Iterable[RunStore]) -> dict[str, Any]:
    """The case metadata the records keep (cases.json), once each, sorted by label."""
    cases: dict[str, Any] = {}
    for store in stores:
        cases.update(store.cases)
    return dict(sorted(cases.items()))


def merged_environments(metas: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What each environment of the records was asked to hold (run.json ``environments``)."""
    environments: dict[str, Any] = {}
    for meta in metas:
        environments.update(meta.get("environments") or {})
    return environments

"""What every format of a report is made from (``Report``), and what is made of it once for
the formats that share it (the long table's columns, the judging, the site's model)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Any

from harness.core.results import (
    CellResult,
    Outcome,
    as_mapping,
    labels,
    logical_keys,
)
from harness.core.rules import Rule
from harness.core.words import plural
from harness.records.bisects import BisectRecord, sentence
from harness.records.expect import Baseline, Judgement, judged_report
from harness.records.reportinput import ReportInput
from harness.report.site.model import Site, build_site, group

KEY_VERSIONS = ("torch", "numpy", "transformers", "transformer-engine", "flash-attn")

#: The long table's columns before the axes (``axis:<name>``, in order of appearance).
LONG = ("environment", "hardware", "column", "outcome", "signature", "reason", "duration",
        "caveat", "cell_id", "attempt", "node", "log", "python", "cuda",
        *(f"v:{k}" for k in KEY_VERSIONS))


def long_columns(results: Sequence[CellResult], log_links: Sequence[str] | None = None,
                 labels_of: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """One row per cell, as columns: ``LONG``, then each axis in order of appearance.
    ``log_links``: each log's link ("" for none); ``labels_of``: the results' ``labels``."""
    made: dict[int, tuple[str, ...]] = {}  # a fingerprint's facts, once for its cells
    facts = [made.get(id(r.fingerprint)) or made.setdefault(id(r.fingerprint), _facts(
        r.fingerprint)) for r in results]
    columns: dict[str, list[Any]] = {
        "environment": [r.environment for r in results],
        "hardware": [r.hardware_target for r in results],
        "column": labels(results) if labels_of is None else list(labels_of),
        "outcome": [str(r.outcome) for r in results],
        "signature": [r.signature or "" for r in results],
        "reason": [r.reason for r in results],
        "duration": [r.duration for r in results],
        # Records before format 2 kept the caveat among the details.
        "caveat": [r.caveat or str(r.details.get("caveat", "")) for r in results],
        "cell_id": [r.cell_id for r in results],
        "attempt": [r.attempt for r in results],
        "node": [r.node for r in results],
        "log": [""] * len(results) if log_links is None else list(log_links),
        **{name: [f[i] for f in facts] for i, name in enumerate(LONG[12:])}}
    for axis in dict.fromkeys(chain.from_iterable(r.values for r in results)):
        columns[f"axis:{axis}"] = [r.values.get(axis, "") for r in results]
    return columns


def _facts(fingerprint: Any) -> tuple[str, ...]:
    """What a fingerprint says of the long table's python, cuda and key versions."""
    fp = as_mapping(fingerprint)
    key, torch = as_mapping(fp.get("key")), as_mapping(fp.get("torch"))
    return (fp.get("python") or "", torch.get("cuda") or ("cpu" if torch else ""),
            *(key.get(k, "") for k in KEY_VERSIONS))


def summary_line(columns: Mapping[str, Sequence[Any]]) -> str:
    counts = Counter(columns.get("outcome", ()))
    parts = [f"{counts[str(o)]} {o}" for o in Outcome if counts[str(o)]]
    cells, envs = len(columns.get("outcome", ())), len(set(columns.get("environment", ())))
    return (f"{plural(cells, 'cell')} in {plural(envs, 'environment')}: "
            + (", ".join(parts) or "nothing run"))


def heatmap(columns: Mapping[str, Sequence[Any]]) -> list[list[Outcome | None]]:
    """Rows: environment @ hardware, in the table's order; columns: case variants, sorted."""
    names = sorted(set(columns["column"]))
    at = {name: i for i, name in enumerate(names)}
    rows: dict[tuple[str, str], list[Outcome | None]] = {}
    outcomes = {str(o): o for o in Outcome}  # a lookup, not an Enum call per cell
    for env, hw, name, outcome in zip(columns["environment"], columns["hardware"],
                                      columns["column"], columns["outcome"], strict=True):
        row = rows.get((env, hw))
        if row is None:
            row = rows[(env, hw)] = [None] * len(names)
        row[at[name]] = outcomes[outcome]
    return list(rows.values())


@dataclass(frozen=True)
class Report(ReportInput):
    """One report's inputs (what its records hold, read once), and what the formats make of
    them once, where first asked."""

    rule_set: tuple[Rule, ...]  # ``rules``, read
    baseline: Baseline | None
    given: Sequence[CellResult] | None  # one record's results, as its caller holds them
    rows: list[CellResult]  # each cell's last attempt, in plan order (the report's)
    links: list[str]  # each row's log's link from the report ("": none)
    changes: Callable[[], list[dict[str, Any]]]

    def logs(self) -> dict[str, str]:
        """Cell id -> its log's link (made where asked: the downloads read them in order)."""
        return dict(zip((r.cell_id for r in self.rows), self.links, strict=True))

    @property
    def name(self) -> str:
        return ", ".join(s.run_id for s in self.stores)

    @property
    def since(self) -> str | None:
        return self.previous.run_id if self.previous is not None else None

    @property
    def damaged(self) -> int:
        """The records' lines left out: found as the cells were read, and by their merges."""
        return (sum(len(s.damaged) for s in self.stores)
                + sum(int(m.get("damaged_lines") or 0) for m in self.metas))

    @cached_property
    def keys(self) -> list[tuple[str, str, str]]:
        """Each row's logical key: JUnit's order; their middles, the long table's column."""
        return logical_keys(self.rows)

    @cached_property
    def columns(self) -> dict[str, list[Any]]:
        """The long table (the CSV, compat.json's summary, cells.html and the heatmap)."""
        return long_columns(self.rows, self.links,
                            labels_of=[key[1] for key in self.keys])

    @cached_property
    def judged(self) -> tuple[list[str], list[tuple[CellResult, Judgement]]]:
        """Against expectations: the summary's lines, and the cells it lists one by one."""
        return judged_report(self.rows, self.rule_set, self.baseline, limit=200)

    @cached_property
    def site(self) -> Site:
        """The model the pages, compat.md and summary.txt are rendered from."""
        rows = self.rows
        return build_site(rows, self.environments, self.cases, self.metas, self.logs(),
                          self.changes(), self.since,
                          bisects=_bisects(self.bisects, {r.case_id for r in rows}),
                          damaged=self.damaged)


def _bisects(records: Sequence[BisectRecord], case_ids: set[str]) -> dict[str, list[str]]:
    """What bisects found for these cases, newest per cell and axis."""
    newest: dict[tuple[Any, ...], BisectRecord] = {}
    for record in records:
        if record.case in case_ids:
            newest[(record.case, record.variant, record.hardware, record.origin,
                    tuple(sorted(record.values.items())), record.axis)] = record
    return {case: list(map(sentence, found))
            for case, found in group(newest.values(), lambda r: r.case).items()}


"""Bisect records (``reports/bisects/<id>.json``): where an outcome changes along an axis, and
the run of each probe, against whose results a report checks a "first fixed in" line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.core.atomic import write_text
from harness.core.errors import StoreError
from harness.core.results import CellResult, Outcome
from harness.records.store import RunStore

BISECT_FORMAT = "ml-compat-harness bisect 1"
FOLDER = "bisects"


@dataclass(frozen=True, kw_only=True)
class BisectRecord:
    """What one bisect found, for the cell ``case::variant`` on ``hardware`` in the
    environments of ``origin`` whose other values are ``values``."""

    bisect_id: str
    axis: str
    case: str  # case id
    variant: str
    hardware: str
    origin: str  # the matrix (or named environment) the cell's environments come from
    values: dict[str, str]  # the cell's other axis values (not the bisected one)
    last: dict[str, Any]  # plan.bisect.Probe.to_dict(): the last release with the outcome
    first: dict[str, Any]  # ... and the first with another
    probes: list[dict[str, Any]]
    untested: list[str]  # releases between last and first that could not be built
    created: float = 0.0
    package: str = ""  # the axis's distribution, as the report's tables name it

    def to_dict(self) -> dict[str, Any]:
        return {"format": BISECT_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BisectRecord:
        return cls(**{k: v for k, v in data.items() if k != "format"})


def write_bisect(reports_dir: Path, record: BisectRecord) -> Path:
    return write_finding(reports_dir, record.bisect_id, record.to_dict())


def write_finding(reports_dir: Path, name: str, data: dict[str, Any]) -> Path:
    """A bisect's (or a ``--between``'s) finding, as ``reports/bisects/<name>.json``."""
    folder = reports_dir / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def read_bisects(reports_dir: Path) -> list[BisectRecord]:
    """Every bisect under ``reports_dir``, oldest first."""
    folder = reports_dir / FOLDER
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != BISECT_FORMAT:
                continue  # another tool's file, or a newer format: not ours to read
            found.append(BisectRecord.from_dict(data))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise StoreError(f"{path}: unreadable bisect record: {exc}") from None
    return sorted(found, key=lambda r: (r.created, r.bisect_id))


def reports_dir_of(run_dir: Path) -> Path | None:
    """The reports folder a run folder sits in (``<reports>/runs/<id>``), or None."""
    return run_dir.parent.parent if run_dir.parent.name == "runs" else None


def sentence(record: BisectRecord) -> str:
    """How a failure page's verdict says what a bisect found (``harness.report.check``
    reads it back)."""
    last, first = record.last, record.first
    verb = ("fixed" if (last["outcome"], first["outcome"]) == ("REPRODUCED", "PASS") else
            "affected" if (last["outcome"], first["outcome"]) == ("PASS", "REPRODUCED") else
            shown(first))  # PASS -> FAIL, or another signature: the outcome itself
    name = record.package or record.axis
    text = (f"bisect: first {verb} in {name} {first['version']} (last {shown(last)}: "
            f"{name} {last['version']}; {record.variant} @{record.hardware})")
    if record.untested:
        text += f"; or at {', '.join(record.untested)} (could not be built)"
    return text


def shown(probe: dict[str, Any]) -> str:
    return str(probe["outcome"]) + (f" ({probe['signature']})" if probe.get("signature")
                                    else "")


def probe_result(reports_dir: Path, record: BisectRecord, probe: dict[str, Any]
                 ) -> tuple[str, str | None] | None:
    """(outcome, signature) of the bisected cell in the run a probe names, or None."""
    try:
        store = RunStore.open(reports_dir, probe["run_id"])
    except StoreError:
        return None
    for result in cell_results(store.results(), record.case, record.variant, record.hardware):
        return (str(result.outcome), result.signature)
    return None


def cell_results(results: Iterable[CellResult], case: str, variant: str, hardware: str
                 ) -> list[CellResult]:
    """The results of ``case::variant`` on ``hardware`` that ran (in a probe's run: the cell)."""
    return [r for r in results if (r.case_id, r.variant, r.hardware_target) == (
        case, variant, hardware) and r.outcome is not Outcome.NOT_RUN and not r.parent]

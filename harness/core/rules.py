"""An expectation rule (matrix.yaml ``expect:``): which outcomes some cells are known to show."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from harness.core.results import CellResult, Outcome

Key = tuple[str, str, str]


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One ``expect:`` entry. Globs select cells; ``case`` without ``::`` names a case id."""

    outcomes: frozenset[Outcome]
    why: str
    environment: str = "*"
    case: str = "*"
    hardware: str = "*"
    reason: str | None = None  # a regular expression searched in the result's reason
    where: str = ""  # "matrix.yaml:12", for messages

    def selects(self, key: Key) -> bool:
        environment, label, hardware = key
        case = label if "::" in self.case else label.split("::", 1)[0]
        return (fnmatchcase(environment, self.environment) and fnmatchcase(case, self.case)
                and fnmatchcase(hardware, self.hardware))

    def holds_for(self, result: CellResult) -> bool:
        return self.selects(result.logical_key) and (
            self.reason is None or re.search(self.reason, result.reason) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"environment": self.environment, "case": self.case, "hardware": self.hardware,
                "outcome": sorted(str(o) for o in self.outcomes), "reason": self.reason,
                "why": self.why, "where": self.where}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Rule:
        return cls(outcomes=frozenset(Outcome(o) for o in data["outcome"]), why=data["why"],
                   environment=data.get("environment", "*"), case=data.get("case", "*"),
                   hardware=data.get("hardware", "*"), reason=data.get("reason"),
                   where=data.get("where", ""))

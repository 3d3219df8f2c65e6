"""JUnit XML for CI systems that read it: one testcase per cell.

FAIL is a failure; ERROR, TIMEOUT, CRASH and MISSING are errors; SKIP and NOT_RUN are
skipped; PASS, REPRODUCED and FLAKY pass (REPRODUCED carries its signature as a property: the
documented failure happened, which is what the cell is for; FLAKY carries outcome=FLAKY and
how it failed first).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness.results import CellResult, Outcome

FAILURES = {Outcome.FAIL}
ERRORS = {Outcome.ERROR, Outcome.TIMEOUT, Outcome.CRASH, Outcome.MISSING}
SKIPPED = {Outcome.SKIP, Outcome.NOT_RUN}


def junit_xml(results: Sequence[CellResult], name: str) -> ET.ElementTree:
    kinds = Counter("failure" if r.outcome in FAILURES else "error" if r.outcome in ERRORS
                    else "skipped" if r.outcome in SKIPPED else "passed" for r in results)
    suite = ET.Element("testsuite", {
        "name": name, "tests": str(len(results)), "failures": str(kinds["failure"]),
        "errors": str(kinds["error"]), "skipped": str(kinds["skipped"]),
        "time": f"{sum(r.duration for r in results):.3f}"})
    for r in sorted(results, key=lambda r: r.logical_key):
        case = ET.SubElement(suite, "testcase", {
            "classname": f"{r.environment} @{r.hardware_target}",
            "name": f"{r.case_id}::{r.variant}", "time": f"{r.duration:.3f}"})
        properties = ET.SubElement(case, "properties")
        for key, value in (("outcome", str(r.outcome)), ("cell_id", r.cell_id),
                           ("flaky", r.reason if r.outcome is Outcome.FLAKY else ""),
                           ("signature", r.signature or ""), ("log", r.log or ""),
                           ("caveat", r.caveat)):
            if value:
                ET.SubElement(properties, "property", {"name": key, "value": value})
        if r.outcome in FAILURES:
            ET.SubElement(case, "failure", {"message": r.reason[:1000],
                                            "type": str(r.outcome)}).text = r.reason
        elif r.outcome in ERRORS:
            ET.SubElement(case, "error", {"message": r.reason[:1000],
                                          "type": str(r.outcome)}).text = r.reason
        elif r.outcome in SKIPPED:
            ET.SubElement(case, "skipped", {"message": r.reason[:1000]})
    return ET.ElementTree(suite)


def write_junit(results: Sequence[CellResult], name: str, path: Path) -> Path:
    tree = junit_xml(results, name)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path

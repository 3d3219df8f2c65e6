"""JUnit XML, read back with junitparser as a CI system would."""

from __future__ import annotations

from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Skipped

from harness.core.results import CellResult, Outcome, as_rows
from harness.report.junit import write_junit


def cell(variant: str, outcome: Outcome, **extra: object) -> CellResult:
    return CellResult(run_id="r", cell_id=variant, environment="cpu:torch=2.0.1", values={},
                      env_key="k", backend="uv", case_id="mergekit_fp16", variant=variant,
                      nodeid=f"t.py::test_{variant}", hardware_target="cpu", outcome=outcome,
                      reason=f"reason of {variant}", duration=1.5, **extra)  # type: ignore[arg-type]


def test_each_outcome_maps_to_what_ci_systems_understand(tmp_path: Path) -> None:
    results = [cell("pass", Outcome.PASS), cell("repro", Outcome.REPRODUCED,
                                                signature="addmm-half-cpu"),
               cell("fail", Outcome.FAIL), cell("crash", Outcome.CRASH),
               cell("timeout", Outcome.TIMEOUT), cell("missing", Outcome.MISSING),
               cell("skip", Outcome.SKIP), cell("notrun", Outcome.NOT_RUN)]
    path = write_junit(results, "nightly", tmp_path / "junit.xml")
    xml = JUnitXml.fromfile(str(path))
    (suite,) = list(xml) if not hasattr(xml, "name") or xml.name != "nightly" else [xml]
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (8, 1, 3, 2)
    by_name = {case.name: case for case in suite}
    assert by_name["mergekit_fp16::repro"].is_passed
    import xml.etree.ElementTree as ET

    repro = next(c for c in ET.parse(path).getroot() if c.get("name") == "mergekit_fp16::repro")
    props = {p.get("name"): p.get("value") for p in repro.iter("property")}
    assert props["signature"] == "addmm-half-cpu" and props["outcome"] == "REPRODUCED"
    assert isinstance(by_name["mergekit_fp16::fail"].result[0], Failure)
    assert isinstance(by_name["mergekit_fp16::crash"].result[0], Error)
    assert by_name["mergekit_fp16::missing"].result[0].type == "MISSING"
    assert isinstance(by_name["mergekit_fp16::notrun"].result[0], Skipped)
    assert by_name["mergekit_fp16::fail"].classname == "cpu:torch=2.0.1 @cpu"


def test_any_text_in_a_record_stays_well_formed_xml_and_reads_back(tmp_path: Path) -> None:
    """Reasons and names are whatever a case printed: markup, quotes, newlines, control
    bytes from a crashed process. The file still parses, and reads back as written (the
    control bytes XML cannot hold as U+FFFD)."""
    import xml.etree.ElementTree as ET

    reason = 'a < b & "c" > \'d\'\n\tline two \x1b[31mred\x00 🐞 ]]>'
    hostile = CellResult.from_dict({**cell("x", Outcome.FAIL).to_dict(), "reason": reason,
                                    "environment": 'env "<&>"', "caveat": "x\ny"})
    path = write_junit([hostile, cell("ok", Outcome.PASS)], 'suite "<&>"', tmp_path / "j.xml")
    root = ET.parse(path).getroot()
    assert root.get("name") == 'suite "<&>"' and root.get("tests") == "2"
    case = next(c for c in root if c.get("name") == "mergekit_fp16::x")
    shown = reason.replace("\x1b", "\ufffd").replace("\x00", "\ufffd")
    assert case.get("classname") == 'env "<&>" @cpu'
    failure = case.find("failure")
    assert failure is not None and failure.text == shown and failure.get("message") == shown
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["caveat"] == "x\ny" and props["outcome"] == "FAIL"


def test_rows_write_the_same_file_as_results(tmp_path: Path) -> None:
    """The report writes JUnit from ``as_rows``: byte for byte what the results give."""
    results = [cell("b", Outcome.FAIL, caveat="fp8 off"), cell("a", Outcome.FLAKY),
               cell("c", Outcome.SKIP, log="logs/c.log"), cell("d", Outcome.PASS)]
    one = write_junit(results, "n", tmp_path / "from-results.xml").read_bytes()
    assert write_junit(as_rows(results), "n", tmp_path / "from-rows.xml").read_bytes() == one
    assert b"fp8 off" in one and b'name="mergekit_fp16::a"' in one

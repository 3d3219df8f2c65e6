"""JUnit XML, read back with junitparser as a CI system would."""

from __future__ import annotations

from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import Error, Failure, JUnitXml, Skipped

from harness.core import jsonio
from harness.core.results import CellResult, Outcome
from harness.report.junit import write_junit
from tests.conftest import examples


def cell(variant: str, outcome: Outcome, **extra: object) -> CellResult:
    fields: dict[str, object] = {
        "run_id": "r", "cell_id": variant, "environment": "cpu:torch=2.0.1", "values": {},
        "env_key": "k", "backend": "uv", "case_id": "mergekit_fp16", "variant": variant,
        "nodeid": f"t.py::test_{variant}", "hardware_target": "cpu", "outcome": outcome,
        "reason": f"reason of {variant}", "duration": 1.5}
    return CellResult(**{**fields, **extra})  # type: ignore[arg-type]


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


def decoded(results: list[CellResult]) -> list[CellResult]:
    """Results as their lines decode (msgspec, against the schema), each its own objects."""
    return [msgspec.json.decode(jsonio.dumps(r.to_dict()), type=CellResult) for r in results]


def test_decoded_lines_write_the_same_file_as_results(tmp_path: Path) -> None:
    """JUnit from results decoded from their lines: byte for byte what the results give."""
    results = [cell("b", Outcome.FAIL, caveat="fp8 off"), cell("a", Outcome.FLAKY),
               cell("c", Outcome.SKIP, log="logs/c.log"), cell("d", Outcome.PASS)]
    one = write_junit(results, "n", tmp_path / "from-results.xml").read_bytes()
    assert write_junit(decoded(results), "n", tmp_path / "from-rows.xml").read_bytes() == one
    assert b"fp8 off" in one and b'name="mergekit_fp16::a"' in one


def reference_lines(results: list[CellResult], name: str) -> str:
    """JUnit made testcase by testcase, nothing shared between them (what the report wrote
    before it made what many cells share once)."""
    from collections import Counter

    from harness.report.junit import ERRORS, FAILURES, SKIPPED, _attr, _text

    kinds = Counter("failure" if r.outcome in FAILURES else "error" if r.outcome in ERRORS
                    else "skipped" if r.outcome in SKIPPED else "passed" for r in results)
    out = ["<?xml version='1.0' encoding='utf-8'?>\n",
           f'<testsuite name="{_attr(name)}" tests="{len(results)}" '
           f'failures="{kinds["failure"]}" errors="{kinds["error"]}" '
           f'skipped="{kinds["skipped"]}" time="{sum(r.duration for r in results):.3f}">\n']
    session_logs = {r.cell_id: r.log for r in results}
    for r in sorted(results, key=lambda r: r.logical_key):
        outcome = str(r.outcome)
        out.append(f'  <testcase classname="{_attr(f"{r.environment} @{r.hardware_target}")}" '
                   f'name="{_attr(f"{r.case_id}::{r.variant}")}" time="{r.duration:.3f}">')
        props = []
        session_log = r.parent and session_logs.get(r.parent) == r.log
        for key, value in (("outcome", "" if r.outcome is Outcome.PASS else outcome),
                           ("cell_id", "" if r.parent and r.parent in session_logs else r.cell_id),
                           ("flaky", r.reason if r.outcome is Outcome.FLAKY else ""),
                           ("signature", r.signature or ""),
                           ("log", "" if session_log else r.log or ""), ("caveat", r.caveat)):
            if value:
                props.append(f'<property name="{key}" value="{_attr(value)}"/>')
        if props:
            out.append("<properties>" + "".join(props) + "</properties>")
        if r.outcome in FAILURES or r.outcome in ERRORS:
            tag = "failure" if r.outcome in FAILURES else "error"
            out.append(f'<{tag} message="{_attr(r.reason[:1000])}" type="{outcome}">'
                       f"{_text(r.reason)}</{tag}>")
        elif r.outcome in SKIPPED:
            out.append(f'<skipped message="{_attr(r.reason[:1000])}"/>')
        elif not props:
            out[-1] = out[-1][:-1] + "/>\n"
            continue
        out.append("</testcase>\n")
    out.append("</testsuite>\n")
    return "".join(out)


TEXT = st.text(alphabet=st.sampled_from(list('ab:<&>"\n\t\x00\x1b 🐞')), max_size=5)


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cells=st.lists(st.builds(
    lambda env, variant, outcome, reason, signature, log, caveat, cell_id, duration, parent:
    cell(variant, outcome, environment=env, reason=reason, signature=signature, log=log,
         caveat=caveat, cell_id=cell_id, duration=duration, parent=parent),
    st.sampled_from(["e1", 'e "2"']), st.sampled_from(["a", "b<"]), st.sampled_from(list(Outcome)),
    TEXT, st.none() | TEXT, st.none() | st.sampled_from(["a", "b"]) | TEXT, TEXT,
    st.sampled_from(["a", "b"]) | TEXT, st.sampled_from([0, 1.5, 2.0005, 1e9]),
    st.sampled_from(["", "a", "b"])), max_size=8))
def test_testcases_are_what_writing_each_alone_gives(tmp_path: Path,
                                                     cells: list[CellResult]) -> None:
    """Every outcome (FLAKY's reason as a property), reasons, signatures, logs, caveats and
    ids of any text, shared by several cells or not, a suite's tests with their session's log
    or another, from results and from their lines decoded."""
    want = reference_lines(cells, "n")
    assert write_junit(cells, "n", tmp_path / "a.xml").read_text(encoding="utf-8") == want
    assert write_junit(decoded(cells), "n", tmp_path / "b.xml").read_text(
        encoding="utf-8") == want


def test_names_equal_in_python_but_written_differently_stay_apart(tmp_path: Path) -> None:
    """A hand-written record's 1, 1.0 and true (one key of a dict) are three names."""
    cells = [cell("a", Outcome.PASS, hardware_target=1, cell_id="1"),
             cell("a", Outcome.PASS, hardware_target=True, cell_id="2"),
             cell("a", Outcome.PASS, hardware_target=1.0, cell_id="3")]
    text = write_junit(cells, "n", tmp_path / "j.xml").read_text(encoding="utf-8")
    assert text == reference_lines(cells, "n")
    assert "@1\"" in text and "@True\"" in text and "@1.0\"" in text


def test_a_suites_passing_tests_are_a_short_line_each(tmp_path: Path) -> None:
    """Thousands of passing tests: an empty element each, no outcome property (JUnit says they
    passed), no log (their session's testcase names it), no cell id (their session's
    environment and their name say which); a test with a log of its own keeps it."""
    session = cell("(session)", Outcome.FAIL, cell_id="s", log="logs/s.log")
    tests = [cell(f"t.py::test_{i}", Outcome.PASS, cell_id=f"{i:012x}", parent="s",
                  log="logs/s.log", reason="") for i in range(1000)]
    earlier = cell("t.py::test_z", Outcome.PASS, cell_id="z", parent="s", log="logs/s.1.log")
    path = write_junit([session, *tests, earlier], "n", tmp_path / "junit.xml")
    text = path.read_text(encoding="utf-8")
    assert text.count('value="logs/s.log"') == 1 and 'value="logs/s.1.log"' in text
    line = next(x for x in text.splitlines() if 'name="mergekit_fp16::t.py::test_5"' in x)
    assert line == ('  <testcase classname="cpu:torch=2.0.1 @cpu" name="mergekit_fp16::t.py::'
                    'test_5" time="1.500"/>')  # its name in its session's environment says which
    xml = JUnitXml.fromfile(str(path))
    (suite,) = [xml] if getattr(xml, "name", None) == "n" else list(xml)
    by_name = {case.name: case for case in suite}
    assert len(by_name) == 1002 and by_name["mergekit_fp16::t.py::test_5"].is_passed
    assert isinstance(by_name["mergekit_fp16::(session)"].result[0], Failure)

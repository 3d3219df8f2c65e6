"""junit.xml: one testcase per cell, written as text a line each (ElementTree is slow).

FAIL is a failure; ERROR, TIMEOUT, CRASH and MISSING errors; SKIP and NOT_RUN skipped; the rest
pass. Every outcome but PASS, a signature, a log and a caveat are properties, and the cell id
but a suite's test's (its name in its session's environment says which).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import islice
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.results import CellResult, Outcome, logical_keys

if TYPE_CHECKING:
    from harness.report.data import Report

FAILURES = {Outcome.FAIL}
ERRORS = {Outcome.ERROR, Outcome.TIMEOUT, Outcome.CRASH, Outcome.MISSING}
SKIPPED = {Outcome.SKIP, Outcome.NOT_RUN}
# Characters XML 1.0 cannot carry at all (a crash's log may hold any byte): shown as U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


# Anything _attr would change: most names and ids have none of it, and go out as they are.
_SPECIAL = re.compile('[&<>"\x00-\x1f\ufffe\uffff]')


def _text(value: str) -> str:
    if _SPECIAL.search(value) is None:
        return value
    return _NOT_XML.sub("\ufffd", value.replace("&", "&amp;").replace("<", "&lt;")
                        .replace(">", "&gt;"))


def _attr(value: str) -> str:
    """An attribute value in double quotes; newlines and tabs kept as character references
    (a parser would turn them into spaces)."""
    if _SPECIAL.search(value) is None:
        return value
    return (_text(value).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;")
            .replace("\t", "&#09;"))


def _lines(results: Sequence[CellResult], name: str, keys: Sequence[tuple[str, str, str]]
           ) -> Iterator[str]:
    kinds: Counter[str] = Counter()
    for outcome, count in Counter(map(attrgetter("outcome"), results)).items():  # in C
        kinds["failure" if outcome in FAILURES else "error" if outcome in ERRORS
              else "skipped" if outcome in SKIPPED else "passed"] += count
    time = sum(map(attrgetter("duration"), results))
    yield "<?xml version='1.0' encoding='utf-8'?>\n"
    yield (f'<testsuite name="{_attr(name)}" tests="{len(results)}" '
           f'failures="{kinds["failure"]}" errors="{kinds["error"]}" '
           f'skipped="{kinds["skipped"]}" time="{time:.3f}">\n')
    # What many cells share (names, properties, a testcase's end) is escaped once.
    ids = list(map(attrgetter("cell_id"), results))
    # hex ids, none with anything to escape (one search for all): written as they are
    plain_ids = set(map(type, ids)) <= {str} and _SPECIAL.search("".join(ids)) is None
    parents = set(map(attrgetter("parent"), results)) - {""}
    session_logs = {r.cell_id: r.log for r in results if r.cell_id in parents} if parents else {}
    attr, prop, end_of = functools.cache(_attr), functools.cache(_property), functools.cache(_end)
    for i in sorted(range(len(results)), key=keys.__getitem__):
        r, (environment, which, hardware_target) = results[i], keys[i]
        outcome, reason = r.outcome, r.reason
        parts = [f'  <testcase classname="{attr(f"{environment} @{hardware_target}")}" '
                 f'name="{attr(which)}" time="{r.duration:.3f}">']
        if outcome is not Outcome.PASS:
            parts.append(_OUTCOME[outcome])
        # each its own (none made twice); a suite's test is found by its name in its session
        if r.cell_id and r.parent not in session_logs:
            parts.append(_CELL_ID % r.cell_id if plain_ids else _property("cell_id", r.cell_id))
        if outcome is Outcome.FLAKY and reason:
            parts.append(prop("flaky", reason))
        if r.signature:
            parts.append(prop("signature", r.signature))
        if r.log and not (r.parent and session_logs.get(r.parent) == r.log):
            parts.append(prop("log", r.log))
        if r.caveat:
            parts.append(prop("caveat", r.caveat))
        if len(parts) > 1:
            parts.insert(1, "<properties>")
            parts.append("</properties>")
        end = end_of(outcome, reason)
        if len(parts) == 1 and end == _PASSED:  # nothing inside: an empty element
            parts[0] = parts[0][:-1] + "/>\n"
        else:
            parts.append(end)
        yield "".join(parts)
    yield "</testsuite>\n"


def _property(key: str, value: str) -> str:
    return f'<property name="{key}" value="{_attr(value)}"/>'


#: An outcome's property (its name is plain capitals: nothing to escape).
_OUTCOME = {o: _property("outcome", o) for o in Outcome}


_CELL_ID = _property("cell_id", "%s")  # for an id with nothing to escape


def _end(outcome: Outcome, reason: str) -> str:
    """A testcase's end: its failure, error or skip (with why)."""
    if outcome in FAILURES or outcome in ERRORS:
        tag = "failure" if outcome in FAILURES else "error"
        verdict = (f'<{tag} message="{_attr(reason[:1000])}" type="{outcome}">'
                   f"{_text(reason)}</{tag}>")
    elif outcome in SKIPPED:
        verdict = f'<skipped message="{_attr(reason[:1000])}"/>'
    else:
        verdict = ""
    return f"{verdict}</testcase>\n"


_PASSED = _end(Outcome.PASS, "")


def write_junit(results: Sequence[CellResult], name: str, path: Path,
                keys: Sequence[tuple[str, str, str]] | None = None) -> Path:
    """``keys``: the results' logical keys (``logical_keys``), where the caller has them."""
    with open(path, "w", encoding="utf-8") as fh:
        lines = _lines(results, name, logical_keys(results) if keys is None else keys)
        while chunk := "".join(islice(lines, 5000)):  # a write per few thousand testcases
            fh.write(chunk)
    return path


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """The report's junit.xml."""
    path = out_dir / "junit.xml"
    write_junit(report.cells.rows, f"ml-compat-harness {report.name}", path, report.keys)
    return {"junit": path}

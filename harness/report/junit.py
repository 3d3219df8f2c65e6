"""junit.xml: one testcase per cell, written as text a line each.

FAIL is a failure; ERROR, TIMEOUT, CRASH and MISSING errors; SKIP and NOT_RUN skipped; the rest
pass. Every outcome but PASS, a signature, a log and a caveat are properties, and the cell id
but a suite's test's (its name in its session's environment says which).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from harness.core.results import CellResult, Outcome, logical_keys

FAILURES = {Outcome.FAIL}
ERRORS = {Outcome.ERROR, Outcome.TIMEOUT, Outcome.CRASH, Outcome.MISSING}
SKIPPED = {Outcome.SKIP, Outcome.NOT_RUN}
# Characters XML 1.0 cannot carry at all (a crash's log may hold any byte): shown as U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
#: What an attribute escapes besides a text's: its quote, and the whitespace a parser would
#: turn into spaces.
_IN_ATTR = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#09;"}


def _text(value: str) -> str:
    return escape(_NOT_XML.sub("\ufffd", value))


#: Anything ``_attr`` would change: most names and ids have none of it, and go out as they are.
_SPECIAL = re.compile('[&<>"\x00-\x1f\ufffe\uffff]')


def _attr(value: str) -> str:
    """An attribute value in double quotes."""
    if _SPECIAL.search(value) is None:
        return value
    return escape(_NOT_XML.sub("\ufffd", value), _IN_ATTR)


def _kind(outcome: Outcome) -> str:
    return ("failure" if outcome in FAILURES else "error" if outcome in ERRORS
            else "skipped" if outcome in SKIPPED else "passed")


def _lines(results: Sequence[CellResult], name: str, keys: Sequence[tuple[str, str, str]]
           ) -> Iterator[str]:
    kinds = Counter(_kind(r.outcome) for r in results)
    yield "<?xml version='1.0' encoding='utf-8'?>\n"
    yield (f'<testsuite name="{_attr(name)}" tests="{len(results)}" '
           f'failures="{kinds["failure"]}" errors="{kinds["error"]}" '
           f'skipped="{kinds["skipped"]}" time="{sum(r.duration for r in results):.3f}">\n')
    parents = {r.parent for r in results} - {""}
    session_logs = {r.cell_id: r.log for r in results if r.cell_id in parents}
    for i in sorted(range(len(results)), key=keys.__getitem__):
        r, (environment, which, hardware_target) = results[i], keys[i]
        props = [("outcome", str(r.outcome))] if r.outcome is not Outcome.PASS else []
        if r.cell_id and r.parent not in session_logs:  # a suite's test: found by its name
            props.append(("cell_id", r.cell_id))
        if r.outcome is Outcome.FLAKY and r.reason:
            props.append(("flaky", r.reason))
        props += [(key, value) for key, value in (("signature", r.signature), (
            "log", "" if r.parent and session_logs.get(r.parent) == r.log else r.log), (
            "caveat", r.caveat)) if value]
        head = (f'  <testcase classname="{_attr(f"{environment} @{hardware_target}")}" '
                f'name="{_attr(which)}" time="{r.duration:.3f}"')
        kind = _kind(r.outcome)
        if not props and kind == "passed":
            yield head + "/>\n"  # nothing inside: an empty element
            continue
        inside = "".join(f'<property name="{k}" value="{_attr(v)}"/>' for k, v in props)
        yield head + (f"><properties>{inside}</properties>" if props else ">") + _end(
            kind, r.outcome, r.reason) + "</testcase>\n"
    yield "</testsuite>\n"


def _end(kind: str, outcome: Outcome, reason: str) -> str:
    """A testcase's failure, error or skip (with why)."""
    if kind in ("failure", "error"):
        return (f'<{kind} message="{_attr(reason[:1000])}" type="{outcome}">'
                f"{_text(reason)}</{kind}>")
    return f'<skipped message="{_attr(reason[:1000])}"/>' if kind == "skipped" else ""


def write_junit(results: Sequence[CellResult], name: str, path: Path,
                keys: Sequence[tuple[str, str, str]] | None = None) -> Path:
    """``keys``: the results' logical keys (``logical_keys``), where the caller has them."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(_lines(results, name, logical_keys(results) if keys is None else keys))
    return path

"""JUnit XML for CI systems that read it: one testcase per cell.

FAIL is a failure; ERROR, TIMEOUT, CRASH and MISSING are errors; SKIP and NOT_RUN are
skipped; PASS, REPRODUCED and FLAKY pass (REPRODUCED carries its signature as a property: the
documented failure happened, which is what the cell is for; FLAKY carries outcome=FLAKY and
how it failed first).

Written as text, element by element (a fleet's 100,000 testcases through ElementTree took
longer than the rest of the report); tests/report/test_junit.py reads it back with ElementTree and
junitparser.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness.core.results import Outcome, ResultLike

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


def _lines(results: Sequence[ResultLike], name: str) -> Iterator[str]:
    kinds = Counter("failure" if r.outcome in FAILURES else "error" if r.outcome in ERRORS
                    else "skipped" if r.outcome in SKIPPED else "passed" for r in results)
    yield "<?xml version='1.0' encoding='utf-8'?>\n"
    yield (f'<testsuite name="{_attr(name)}" tests="{len(results)}" '
           f'failures="{kinds["failure"]}" errors="{kinds["error"]}" '
           f'skipped="{kinds["skipped"]}" time="{sum(r.duration for r in results):.3f}">\n')
    # What many cells share is escaped once: an environment's class name, a case's name, a
    # reason, a batch's log (a fleet's 100,000 testcases: half the time went to escaping).
    attrs: dict[str, str] = {}
    texts: dict[str, str] = {}

    def attr(value: str) -> str:
        found = attrs.get(value)
        if found is None:
            found = attrs[value] = _attr(value)
        return found

    for r in sorted(results, key=lambda r: r.logical_key):
        outcome = str(r.outcome)
        parts = [f'  <testcase classname="{attr(f"{r.environment} @{r.hardware_target}")}" '
                 f'name="{attr(f"{r.case_id}::{r.variant}")}" time="{r.duration:.3f}">\n'
                 "    <properties>\n"
                 # an outcome's name is plain capitals: nothing to escape
                 f'      <property name="outcome" value="{outcome}" />\n']
        for key, value in (("cell_id", r.cell_id),
                           ("flaky", r.reason if r.outcome is Outcome.FLAKY else ""),
                           ("signature", r.signature or ""), ("log", r.log or ""),
                           ("caveat", r.caveat)):
            if value:
                parts.append(f'      <property name="{key}" value="'
                             f'{_attr(value) if key == "cell_id" else attr(value)}" />\n')
        parts.append("    </properties>\n")
        if r.outcome in FAILURES or r.outcome in ERRORS:
            tag = "failure" if r.outcome in FAILURES else "error"
            text = texts.get(r.reason)
            if text is None:
                text = texts[r.reason] = _text(r.reason)
            parts.append(f'    <{tag} message="{attr(r.reason[:1000])}" type="{outcome}">'
                         f"{text}</{tag}>\n")
        elif r.outcome in SKIPPED:
            parts.append(f'    <skipped message="{attr(r.reason[:1000])}" />\n')
        parts.append("  </testcase>\n")
        yield "".join(parts)
    yield "</testsuite>\n"


def write_junit(results: Sequence[ResultLike], name: str, path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(_lines(results, name))
    return path

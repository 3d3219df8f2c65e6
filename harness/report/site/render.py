"""The site and its markdown twin, rendered from ``model.Site`` (jinja2, autoescaped); nothing
fetched from outside, nothing from the clock: the same site renders to the same bytes."""

from __future__ import annotations

import functools
import re
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from harness.core import jsonio
from harness.core.results import Outcome
from harness.core.words import plural
from harness.report.site.heatmap import write_png
from harness.report.site.model import SHORT, Badge, Grid, Header, Row, Site, css, group
from harness.report.site.suites import PYTEST_WORDS

if TYPE_CHECKING:
    from jinja2 import Environment

    from harness.report.site.history_page import HistoryPage

SYMBOLS = {
    Outcome.PASS: "✅", Outcome.REPRODUCED: "🐞", Outcome.FAIL: "❌", Outcome.SKIP: "⏭️",
    Outcome.ERROR: "⚠️", Outcome.TIMEOUT: "⏱️", Outcome.CRASH: "💥", Outcome.NOT_RUN: "·",
    Outcome.MISSING: "❔", Outcome.FLAKY: "🎲",
}
#: The columns of the long table (cells.html), from the long-format frame.
LONG_COLUMNS = ("environment", "hardware", "column", "outcome", "signature", "reason",
                "python", "cuda", "v:torch", "v:transformer-engine", "v:flash-attn", "log")
_NEWS = ("new failure", "fixed", "changed")
#: Rows of a failure table per page (the markdown and the downloads hold every row).
ROWS_PER_PAGE = 200


@functools.cache
def _templates(markdown: bool = False) -> Environment:
    """The templates: the pages' autoescaped; compat.md's plain text, its blocks trimmed."""
    # Imported here: the commands that only pass through this module do not load jinja2.
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                      undefined=StrictUndefined, keep_trailing_newline=True,
                      autoescape=not markdown, trim_blocks=markdown, lstrip_blocks=markdown)
    env.filters.update(code=inline_code, badges=badges, cell=_cell, md_row=_md_row, plural=plural)
    return env


def badges(cell: Sequence[Badge]) -> Markup:
    """A failure table's cell: each variant's badge, escaped."""
    out = []
    for b in cell:
        head, inner = _badge(b.variant, b.outcome, b.reason, b.caveat)
        if b.log:
            inner = f'<a href="{escape(b.log)}">{inner}</a>'
        out.append(f"{head}{inner}</span>")
    return Markup("".join(out))  # every value in it escaped above


@functools.lru_cache(maxsize=4096)  # a report's badges repeat but for their logs
def _badge(variant: str, outcome: Outcome, reason: str, caveat: str) -> tuple[str, str]:
    """A badge's opening tag (its class and title) and its text, escaped."""
    title = (f"{escape(variant)}: {escape(outcome)}" + (f" — {escape(reason)}" if reason else "")
             + (f" (caveat: {escape(caveat)})" if caveat else ""))
    return (f'<span class="badge {escape(css(outcome))}" title="{title}">',
            f'<span class="v">{escape(variant)}</span> <span class="l">{escape(SHORT[outcome])}'
            f'{" †" if caveat else ""}</span>')


_CODE = re.compile(r"`([^`]+)`")


def inline_code(text: str) -> Markup:
    """Escaped text whose ```spans``` are ``<code>``."""
    return Markup(_CODE.sub(lambda m: f"<code>{m[1]}</code>", str(escape(text))))


def script_json(data: Any) -> bytes:
    """JSON safe inside a <script> element (no '<', '>' or '&'), as UTF-8 bytes."""
    return jsonio.dumps(data).replace(b"&", b"\\u0026").replace(b"<", b"\\u003c").replace(
        b">", b"\\u003e")


def render_site(site: Site, out_dir: Path, long_rows: Sequence[Sequence[str]],
                heatmap: Sequence[Sequence[Outcome | None]],
                history: HistoryPage | None = None) -> dict[str, Path]:
    env = _templates()
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    counts = Counter(c["class"] for c in site.changes)
    news = [c for c in site.changes if c["class"] in _NEWS]
    common = {"site": site, "h": site.header, "history": history is not None}
    width = write_png(out_dir / "heatmap.png", heatmap)

    def put(name: str, template: str, **values: Any) -> None:  # each page out as it is made
        text = env.get_template(template).render(**common, **values)
        (out_dir / name).write_text(text, encoding="utf-8")
        paths[name] = out_dir / name

    put("index.html", "index.html.j2", change_counts=[(k, counts[k]) for k in sorted(counts)],
        news=news[:10], more_news=max(0, len(news) - 10), heatmap_width=width)
    put("probes.html", "probes.html.j2", g=site.grid or Grid(hardware=(), rows=()))
    # The long table's data goes out as bytes between the halves of the page, not through
    # the template: a page of 100,000 rows is not held three times.
    mark = f"<!--data {secrets.token_hex(16)}-->"  # in nothing else on the page
    head, tail = env.get_template("cells.html.j2").render(
        **common, columns=LONG_COLUMNS, data_json=Markup(mark)).split(mark)
    with open(out_dir / "cells.html", "wb") as fh:
        fh.write(head.encode() + script_json({
            name: LONG_COLUMNS.index(name) for name in ("outcome", "reason", "log")})[:-1]
            + b',"rows":')
        jsonio.write_array(fh, long_rows, script_json)
        fh.write(b"}" + tail.encode())
    paths["cells.html"] = out_dir / "cells.html"
    for f in site.failures:
        # Pages of ROWS_PER_PAGE rows, the first under the name the index links to.
        names = [f"failure-{f.slug}{f'-{i + 1}' if i else ''}.html"
                 for i in range(max(1, -(-len(f.rows) // ROWS_PER_PAGE)))]
        for i, name in enumerate(names):
            first = i * ROWS_PER_PAGE
            put(name, "failure.html.j2", f=f, rows=f.rows[first:first + ROWS_PER_PAGE],
                first=first + 1, page=i + 1, pages=names)
    for t in site.suites:
        put(f"suite-{t.slug}.html", "suite.html.j2", t=t, words=PYTEST_WORDS, same_words=_SAME)
    if history is not None:
        put("history.html", "history.html.j2", p=history)
    paths["heatmap"] = out_dir / "heatmap.png"
    return paths


def markdown(site: Site, against: Sequence[str] = (),
             cases: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """compat.md: header, verdicts, a table per failure, suites, grid, legend, the
    cells judged ``against`` expectations, each case once (the run record's ``cases``)."""
    counts = Counter(c["class"] for c in site.changes)
    return _templates(markdown=True).get_template("compat.md.j2").render(
        site=site, about=_about(site.header),
        change_counts=sorted(counts.items()), news=[c for c in site.changes if c["class"] in _NEWS],
        symbols=SYMBOLS, words=PYTEST_WORDS, same_words=_SAME, against="\n".join(against),
        cases=group((cases or {}).values(), lambda m: m["case"]))


def _md_row(row: Row, hardware: Sequence[str]) -> str:
    """A failure table's row in compat.md: each variant's outcome, linked to its log."""
    cells = []
    for hw in hardware:
        texts = [(f"{b.variant}: {SYMBOLS[b.outcome]} {b.outcome}" + (" †" if b.caveat else ""),
                  b.log) for b in row.cells[hw]]
        cells.append("<br>".join(_cell(f"[{text}]({log})" if log else text)
                                 for text, log in texts))
    return f"| {_cell(row.label)} (`{row.environment}`) | " + " | ".join(cells) + " |"


def summary_text(site: Site) -> str:
    """What ``harness report`` prints: header, coverage, verdicts, what changed (50 first)."""
    lines = [_about(site.header), site.header.coverage]
    lines += [f"{f.case}: {f.failure}\n  {' · '.join(f.verdict)}" for f in site.failures]
    lines += [f"suite {t.suite}: {t.summary}" for t in site.suites]
    if site.since is not None and any("replaced" in c for c in site.changes):
        lines += _bump_changes(site)
    elif site.since is not None:
        lines += [f"## Changes since {site.since}: {len(site.changes)}",
                  *_change_lines(site.changes)]
    return "\n".join(lines) + "\n"


def _change_lines(changes: Sequence[dict[str, Any]]) -> list[str]:
    """The first 50 changes with the versions that moved, then how many more."""
    lines = []
    for c in changes[:50]:
        versions = ", ".join(f"{k} {v}" for k, v in c.get("versions", {}).items())
        lines.append(f"- {c['class']}: {c['environment']} {c['case']} @{c['hardware']}: "
                     f"{c['before'] or '(none)'} -> {c['after'] or '(none)'}"
                     + (f" [{versions}]" if versions else ""))
    more = [f"- ... and {len(changes) - 50} more (compat.json lists them all)"]
    return lines + more if len(changes) > 50 else lines


def _bump_changes(site: Site) -> list[str]:
    """A bump's changes: the rows it replaced, with how many cells kept their outcome, then
    the cells whose outcome moved."""
    rows: dict[tuple[str, str], list[int]] = {}  # (replaced, new row) -> [cells, kept]
    for c in site.changes:
        if "replaced" in c:
            count = rows.setdefault((c["replaced"], c["environment"]), [0, 0])
            count[0] += 1
            count[1] += c["before"] == c["after"]
    moved = [c for c in site.changes if c["before"] != c["after"]]
    lines = [f"## Changes since {site.since}: {plural(len(moved), 'outcome')} moved"]
    lines += [f"- replaced: {old} -> {new} ({plural(cells, 'cell')} compared, {kept} kept "
              "their outcome)" for (old, new), (cells, kept) in sorted(rows.items())]
    return lines + _change_lines(moved)


def _about(h: Header) -> str:
    return " · ".join(filter(None, [
        h.date, f"run {', '.join(h.run_ids)}", f"harness {h.harness}" if h.harness else "",
        f"matrix {h.matrix_sha256}" if h.matrix_sha256 else "",
        f"bumped: --set {', '.join(h.sets)}" if h.sets else ""]))


_SAME = {"passes": "pass", "fails": "fail"}  # "52 pass everywhere"


def _cell(text: str) -> str:
    """Markdown table text: no pipe or newline breaks the row; HTML stays text."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
            .replace("<br>", "\0").replace("<", "&lt;").replace("\0", "<br>"))

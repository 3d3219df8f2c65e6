"""The site and its markdown twin, rendered from ``model.Site`` (jinja2, autoescaped).

Nothing is fetched from outside and nothing depends on the clock: the same site renders to the
same bytes.
"""

from __future__ import annotations

import functools
import re
import secrets
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

from harness.core import jsonio
from harness.core.results import Outcome
from harness.report.site.heatmap import write_png
from harness.report.site.model import Badge, FailureTable, Grid, Header, Site
from harness.report.site.suites import PYTEST_WORDS, SuiteTable

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


def failure_page(slug: str, index: int) -> str:
    """A failure table's page file: the first is ``failure-<slug>.html``."""
    return f"failure-{slug}.html" if index == 0 else f"failure-{slug}-{index + 1}.html"


def _templates() -> Environment:
    # Imported here: the commands that only pass through this module do not load jinja2.
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    env = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                      autoescape=select_autoescape(["j2", "html"], default=True),
                      undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["code"] = inline_code
    return env


def badges(cell: Sequence[Badge], made: dict[Any, Any] | None = None) -> Markup:
    """A failure table's cell: each variant's badge, escaped. ``made``: what earlier badges
    escaped, kept across a report's pages."""
    made = {} if made is None else made
    out = []
    for b in cell:
        key = (b.variant, b.outcome, b.reason, b.caveat)  # all the badge is but its log
        parts = made.get(key)
        if parts is None:
            parts = made[key] = _badge_parts(b)
        head, inner = parts
        if b.log:
            href = made.get(b.log)
            if href is None:
                href = made[b.log] = str(escape(b.log))
            inner = f'<a href="{href}">{inner}</a>'
        out.append(f"{head}{inner}</span>")
    return Markup("".join(out))  # every value in it escaped above


def _badge_parts(b: Badge) -> tuple[str, str]:
    """A badge's opening tag (its class and title) and its text, escaped."""
    variant = escape(b.variant)
    title = f"{variant}: {escape(b.outcome)}"
    if b.reason:
        title += f" — {escape(b.reason)}"
    if b.caveat:
        title += f" (caveat: {escape(b.caveat)})"
    return (f'<span class="badge {escape(b.css)}" title="{title}">',
            f'<span class="v">{variant}</span> <span class="l">{escape(b.label)}'
            f'{" †" if b.caveat else ""}</span>')


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
    env.filters["badges"] = functools.partial(badges, made={})  # escaped once per report
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    counts = Counter(c["class"] for c in site.changes)
    news = [c for c in site.changes if c["class"] in _NEWS]
    common = {"site": site, "h": site.header, "history": history is not None}
    width = write_png(out_dir / "heatmap.png", heatmap)

    def put(name: str, text: str) -> None:  # each page out as it is made, none kept
        (out_dir / name).write_text(text, encoding="utf-8")
        paths[name] = out_dir / name

    put("index.html", env.get_template("index.html.j2").render(
        **common, change_counts=[(k, counts[k]) for k in sorted(counts)], news=news[:10],
        more_news=max(0, len(news) - 10), heatmap_width=width))
    put("probes.html", env.get_template("probes.html.j2").render(
        **common, g=site.grid or Grid(hardware=(), rows=())))
    # The long table's data goes out as bytes between the halves of the page, not through
    # the template.
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
    failure = env.get_template("failure.html.j2")
    for f in site.failures:
        # Pages of ROWS_PER_PAGE rows, the first under the name the index links to.
        names = [failure_page(f.slug, i) for i in range(max(1, -(-len(f.rows) // ROWS_PER_PAGE)))]
        for i, name in enumerate(names):
            put(name, failure.render(
                **common, f=f, rows=f.rows[i * ROWS_PER_PAGE:(i + 1) * ROWS_PER_PAGE],
                first=i * ROWS_PER_PAGE + 1, page=i + 1, pages=names))
    suite = env.get_template("suite.html.j2")
    for t in site.suites:
        put(f"suite-{t.slug}.html", suite.render(**common, t=t, words=PYTEST_WORDS,
                                                 same_words=_SAME))
    if history is not None:
        put("history.html", env.get_template("history.html.j2").render(**common, p=history))
    paths["heatmap"] = out_dir / "heatmap.png"
    return paths


def markdown(site: Site) -> Iterator[str]:
    """compat.md's lines: header, verdicts, a table per failure, suites, grid, legend."""
    yield from ["# Compatibility report", "", _about(site.header), "", _coverage(site.header)]
    if site.since is not None:
        counts = Counter(c["class"] for c in site.changes)
        yield from ["", f"Since `{site.since}`: "
                    + (", ".join(f"{k}: {counts[k]}" for k in sorted(counts)) or "no change")
                    + "."]
        yield from [f"- {c['class']}: {c['environment']} `{c['case']}` @{c['hardware']}: "
                    f"{c['before']} → {c['after']}" for c in site.changes
                    if c["class"] in _NEWS][:50]
    for f in site.failures:
        yield ""
        yield from _failure_md(f)
    for t in site.suites:
        yield ""
        yield from suite_md(t)
    if site.grid and site.grid.rows and not site.grid.hardware:
        yield from ["", "## Capability grid", "", "No probe ran here."]
    elif site.grid and site.grid.rows:
        g = site.grid
        yield from ["", "## Capability grid", "",
                    "Where each probe works, where the capability is missing (its documented "
                    "failure came), where it failed otherwise: the versions of the packages it "
                    "is about.", "",
                    "| probe | " + " | ".join(g.hardware) + " |",
                    "|---|" + "---|" * len(g.hardware)]
        for name, package, cells in g.rows:
            shown = []
            for hw in g.hardware:
                c = cells[hw]
                text = " · ".join(f"{word}: {found}" for word, found in c.parts())
                shown.append(_cell(text or (f"untested ({c.untested})" if c.untested else "—")))
            yield f"| {_cell(name)} ({package}) | " + " | ".join(shown) + " |"
        if g.bisected:
            yield ""
            yield from [f"- {_cell(s)}" for s in g.bisected]
    if site.unbuildable:
        yield from ["", "## Environments that could not be built", ""]
        yield from [f"- `{env}`: {_cell(why)}" for env, why in site.unbuildable]
    yield from ["", "## Legend", ""]
    yield from [f"- {SYMBOLS[o]} {o}" for o in Outcome]


def summary_text(site: Site) -> str:
    """What ``harness report`` prints: header, coverage, verdicts, what changed (50 first)."""
    lines = [_about(site.header), _coverage(site.header)]
    lines += [f"{f.case}: {f.failure}\n  {' · '.join(f.verdict)}" for f in site.failures]
    for t in site.suites:
        lines.append(f"suite {t.suite}: {t.summary}")
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
    lines = [f"## Changes since {site.since}: {_count(len(moved), 'outcome')} moved"]
    lines += [f"- replaced: {old} -> {new} ({_count(cells, 'cell')} compared, {kept} kept "
              "their outcome)" for (old, new), (cells, kept) in sorted(rows.items())]
    return lines + _change_lines(moved)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _about(h: Header) -> str:
    return " · ".join(filter(None, [
        h.date, f"run {', '.join(h.run_ids)}", f"harness {h.harness}" if h.harness else "",
        f"matrix {h.matrix_sha256}" if h.matrix_sha256 else "",
        f"bumped: --set {', '.join(h.sets)}" if h.sets else ""]))


def _coverage(h: Header) -> str:
    return (f"tested: {', '.join(h.tested) or 'nothing'}"
            + (f"; not tested: {', '.join(h.not_tested)}" if h.not_tested else "")
            + f" — {h.ran:,} of {h.cells:,} cells ran ("
            + ", ".join(f"{n} {name}" for name, n in h.counts) + ")" + h.left_out)


def _failure_md(f: FailureTable) -> list[str]:
    links = ", ".join(f"<{u}>" for u in f.upstream)
    lines = [f"## {f.case}: {_cell(f.failure)}", ""]
    if links:
        lines += [f"Upstream: {links}", ""]
    lines += [f"**Verdict:** {_cell(' · '.join(f.verdict))}", ""]
    if not f.rows:
        return [*lines, "_No cell of this case ran here._"]
    lines += ["| " + (" · ".join(f.varying) or "environment") + " | "
              + " | ".join(f.hardware) + " |", "|---|" + "---|" * len(f.hardware)]
    for row in f.rows:
        cells = []
        for hw in f.hardware:
            texts = [(f"{b.variant}: {SYMBOLS[b.outcome]} {b.outcome}"
                      + (" †" if b.caveat else ""), b.log) for b in row.cells[hw]]
            cells.append("<br>".join(_cell(f"[{text}]({log})" if log else text)
                                     for text, log in texts))
        lines.append(f"| {_cell(row.label)} (`{row.environment}`) | " + " | ".join(cells) + " |")
    caveats = sorted({(b.variant, b.caveat) for row in f.rows for bs in row.cells.values()
                      for b in bs if b.caveat})
    lines += ["", *[f"† {variant}: {_cell(text)}" for variant, text in caveats]] if caveats else []
    notes = []
    if f.not_run_rows:
        notes.append(f"{f.not_run_rows} more environments not run this time")
    notes += [f"could not build `{e}`: {_cell(why)}" for e, why in f.unbuildable]
    return [*lines, *(["", "; ".join(notes) + "."] if notes else [])]


_SAME = {"passes": "pass", "fails": "fail"}  # "52 pass everywhere"


def suite_md(t: SuiteTable) -> list[str]:
    """A test suite: its totals per environment, then the tests whose outcome differs."""
    lines = [f"## Suite {t.suite}: `{t.target}`", ""]
    words = PYTEST_WORDS
    if t.totals:
        lines += ["| environment | result | " + " | ".join(words) + " | imported |",
                  "|---|---|" + "---|" * len(words) + "---|"]
        for row in t.totals:
            counts = dict(row.counts)
            result = f"{SYMBOLS[row.outcome]} {row.outcome}" + (
                f": {row.reason}" if row.reason else "")
            lines.append(f"| {_cell(row.column.name)} (`{row.column.environment}`) | "
                         f"{_cell(result)} | " + " | ".join(str(counts.get(w, 0)) for w in words)
                         + f" | {_cell(row.imported) or '—'} |")
    else:
        lines.append("_No session of this suite ran here._")
    if t.not_run:
        lines += ["", "Not run: " + "; ".join(f"{_cell(c)} ({_cell(why)})"
                                             for c, why in t.not_run) + "."]
    same = ", ".join(f"{n} {_SAME.get(w, w)} everywhere" for w, n in t.same)
    lines += ["", f"**Same in every environment:** {same or 'no test'}."]
    if not t.differing:
        return [*lines, "", "**Differing:** no test's outcome differs between environments."]
    lines += ["", f"**Differing:** {len(t.differing)} tests.", "",
              "| test | " + " | ".join(_cell(c.name) for c in t.columns) + " | decided by | "
              "first lines |", "|---|" + "---|" * (len(t.columns) + 2)]
    for d in t.differing:
        marks = [f"{SYMBOLS[o]} {o}" if o is not None else "not collected" for o in d.outcomes]
        lines.append(f"| `{_cell(d.test)}` | " + " | ".join(marks) + f" | {_cell(d.claim.text)} | "
                     + ("<br>".join(_cell(line) for line in d.lines) or "—") + " |")
    return lines


def _cell(text: str) -> str:
    """Markdown table text: no pipe or newline breaks the row; HTML stays text."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
            .replace("<br>", "\0").replace("<", "&lt;").replace("\0", "<br>"))


"""The rendered site: a failure table of a fleet's size is split into static pages."""

from __future__ import annotations

import re
from pathlib import Path

from harness.core.results import Outcome
from harness.report.site.model import build_site
from harness.report.site.render import ROWS_PER_PAGE, inline_code, render_site
from tests.report.test_site_model import CASES, cell, envs


def test_a_long_failure_table_is_paged_and_every_row_is_on_exactly_one_page(
        tmp_path: Path) -> None:
    names = [f"t-2.{i}.0" for i in range(2 * ROWS_PER_PAGE + 50)]
    results = [cell(n, "repro", Outcome.REPRODUCED if i % 2 else Outcome.PASS)
               for i, n in enumerate(names)]
    site = build_site(results, envs(*names), CASES, [{"run_id": "r", "created": 0}], {})
    paths = render_site(site, tmp_path, [], [])
    pages = ["failure-mk.html", "failure-mk-2.html", "failure-mk-3.html"]
    assert [p for p in paths if p.startswith("failure-")] == pages
    shown = []
    for page in pages:
        text = (tmp_path / page).read_text()
        shown += re.findall(r'<th class="row" title="([^"]+)">', text)
        assert "rows " in text and all(f'href="{p}"' in text for p in pages if p != page)
    assert sorted(shown) == sorted(names)  # each row once, none dropped
    first = (tmp_path / pages[0]).read_text()
    assert f"rows 1–{ROWS_PER_PAGE} of {len(names)}" in first
    assert 'rel="next">next ›</a>' in first
    last = (tmp_path / pages[2]).read_text()
    assert f"rows {2 * ROWS_PER_PAGE + 1}–{len(names)} of {len(names)}" in last
    assert 'rel="next"' not in last


def test_a_short_table_is_one_page_without_a_pager(tmp_path: Path) -> None:
    site = build_site([cell("t-2.0.1", "repro", Outcome.REPRODUCED)], envs("t-2.0.1"), CASES,
                      [{"run_id": "r", "created": 0}], {})
    paths = render_site(site, tmp_path, [], [])
    assert [p for p in paths if p.startswith("failure-")] == ["failure-mk.html"]
    assert "pager" not in (tmp_path / "failure-mk.html").read_text()


def test_inline_code_is_escaped_then_marked_up() -> None:
    assert str(inline_code("`KeyError: 'recipe'` & <b>")) == (
        "<code>KeyError: &#39;recipe&#39;</code> &amp; &lt;b&gt;")

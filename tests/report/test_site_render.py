"""The rendered site: a failure table of a fleet's size is split into static pages."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.results import Outcome
from harness.report.site.model import Badge, build_site
from harness.report.site.render import ROWS_PER_PAGE, badges, inline_code, render_site
from tests.conftest import examples
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
    assert '<p class="meta">1 cell. Filter' in (tmp_path / "cells.html").read_text()


def test_inline_code_is_escaped_then_marked_up() -> None:
    assert str(inline_code("`KeyError: 'recipe'` & <b>")) == (
        "<code>KeyError: &#39;recipe&#39;</code> &amp; &lt;b&gt;")


#: The badge markup failure.html.j2 wrote in the template before ``render.badges`` (the
#: reference the filter must match, byte for byte, escaping included).
_TEMPLATE_BADGES = (
    '{% for b in cell %}<span class="badge {{ b.css }}" title="{{ b.variant }}: {{ b.outcome }}'
    '{% if b.reason %} — {{ b.reason }}{% endif %}{% if b.caveat %} (caveat: {{ b.caveat }})'
    '{% endif %}">{% if b.log %}<a href="{{ b.log }}">{% endif %}<span class="v">'
    '{{ b.variant }}</span> <span class="l">{{ b.label }}{% if b.caveat %} †{% endif %}'
    '</span>{% if b.log %}</a>{% endif %}</span>{% endfor %}')
_HOSTILE = st.text(alphabet=st.sampled_from('ab<>&"\' —†é'), max_size=8)


_BADGE = st.builds(Badge, variant=_HOSTILE, outcome=st.sampled_from(Outcome), reason=_HOSTILE,
                  log=_HOSTILE, caveat=_HOSTILE)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.lists(_BADGE, max_size=4), min_size=1, max_size=6))
def test_badges_are_written_as_the_template_wrote_them(cells: list[list[Badge]]) -> None:
    from jinja2 import Environment

    template = Environment(autoescape=True).from_string(_TEMPLATE_BADGES)
    for one in cells:
        assert str(badges(one)) == template.render(cell=one)
    assert "<script" not in str(badges([Badge(variant="<script>", outcome=Outcome.FAIL,
                                              reason="<script>", log='"><script>')]))

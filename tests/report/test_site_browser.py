"""The report site, rendered from a real run record and opened in headless Chromium: what a
reader sees is checked from the DOM after layout and scripts, not from the HTML text."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.core.results import CellResult, CellRun, Outcome
from harness.records.store import RunStore
from harness.report.build import write_report

pytestmark = pytest.mark.browser  # headless Chromium (Debian's chromium)

XSS = '<img src=x onerror="window.__xss=1"></script><script>window.__xss=1</script>'
CASES = {
    "mk::repro": {"case": "mk", "variant": "repro", "failure": "addmm on Half <b>x</b>",
                  "upstream": ["https://github.com/arcee-ai/mergekit/issues/175"],
                  "signatures": [{"name": "addmm-half"}]},
}
PROBE = """<script>
window.addEventListener("load", () => {
  const t = document.querySelector("table.grid");
  const out = {
    scroll: document.documentElement.scrollWidth,
    table: t ? Math.ceil(t.getBoundingClientRect().right) : 0,
    badges: [...document.querySelectorAll(".badge")].map((b) => [b.className, b.title]),
    links: [...document.querySelectorAll("a[href$='.log']")].map((a) => a.href),
    failures: [...document.querySelectorAll("#failures li")].map(
      (li) => Math.ceil(li.getBoundingClientRect().bottom)),
    rows: document.querySelectorAll("#cells tbody tr").length,
    texts: [...document.querySelectorAll("td, .badge, .verdict")].map((e) => e.textContent),
    xss: window.__xss === 1, imgs: document.querySelectorAll("img").length,
    squares: [...document.querySelectorAll(".strip span[title]")].map((s) => [
      s.className, getComputedStyle(s).backgroundColor, s.getBoundingClientRect().width]),
  };
  const pre = document.createElement("pre"); pre.id = "probe";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("HARNESS_REQUIRE_CHROMIUM"):
        pytest.fail("Chromium is required here (HARNESS_REQUIRE_CHROMIUM) but not installed")
    pytest.skip("needs Debian's chromium (apt-get install chromium)")


def open_page(page: Path, *, width: int = 1280, height: int = 800) -> dict[str, Any]:
    """Load a copy of ``page`` (same folder, so relative links hold) with a probe script;
    return what the probe measured once the page had loaded."""
    probe = page.with_name(f"probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    proc = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--window-size={width},{height}",
                           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    probe.unlink()
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]


def result(env: str, variant: str, outcome: Outcome, hardware: str, reason: str = ""
           ) -> CellResult:
    torch = env.split("-")[-1]
    cell_id = hashlib.sha256(f"{env} {variant} {hardware}".encode()).hexdigest()[:12]
    return CellResult(run_id="r", cell_id=cell_id,
                      environment=env, values={"torch": torch}, env_key="k", backend="uv",
                      case_id="mk", variant=variant, nodeid="n", hardware_target=hardware,
                      outcome=outcome, reason=reason,
                      fingerprint={"key": {"torch": torch}} if outcome is not Outcome.NOT_RUN
                      else {})


@pytest.fixture
def site(tmp_path: Path) -> Path:
    envs = [f"t-2.{i}.0" for i in range(12)]
    store = RunStore.create(tmp_path, {
        "planned": [], "harness": "0.1.0", "matrix_sha256": "abc",
        "environments": {e: {"requirements": [f"torch=={e[2:]}"], "backend": "uv"}
                         for e in envs}}, run_id="night", cases=CASES)
    for i, env in enumerate(envs):
        repro = Outcome.REPRODUCED if i < 2 else Outcome.PASS
        for hw in ("cpu", "sm_80", "sm_89", "sm_90"):
            outcome = repro if hw in ("cpu", "sm_90") else Outcome.FAIL
            for variant in ("repro", "workaround[bfloat16]", "workaround[float32]",
                            f"workaround[{XSS}]"):
                r = result(env, variant, outcome if variant == "repro" else Outcome.PASS, hw,
                           reason=f"RuntimeError: {XSS}")
                store.record(CellRun(result=r, log=f"log of {r.cell_id}\n".encode()))
    return write_report(store, store.run_dir / "report")["index.html"].parent


def test_a_failure_page_has_coloured_badges_tooltips_live_links_and_fits_1280(
        site: Path) -> None:
    got = open_page(site / "failure-mk.html")
    assert got["scroll"] <= 1280 and got["table"] <= 1280, got  # no sideways scrolling
    classes = {c for c, _ in got["badges"]}
    assert {"badge o-reproduced", "badge o-pass", "badge o-fail"} <= classes
    assert all(title.startswith(("repro: ", "workaround")) for _, title in got["badges"])
    assert any("RuntimeError: <img src=x" in title for _, title in got["badges"])  # tooltip
    assert len(got["links"]) == 12 * 4 * 4
    for link in got["links"]:  # every log link resolves to the log file
        assert Path(link.removeprefix("file://")).read_text().startswith("log of ")
    assert not got["xss"] and got["imgs"] == 0  # the payload stayed text
    assert any(XSS in text for text in got["texts"])


def test_the_long_table_pages_and_keeps_payloads_as_text(site: Path) -> None:
    got = open_page(site / "cells.html")
    assert got["rows"] == 100  # 192 cells, 100 a page: never one huge DOM
    assert not got["xss"] and got["imgs"] == 0
    assert any(text == f"RuntimeError: {XSS}" for text in got["texts"])


def test_the_index_shows_each_failure_and_its_verdict_above_the_fold(site: Path) -> None:
    got = open_page(site / "index.html")
    assert got["failures"] and max(got["failures"]) <= 800
    assert not got["xss"] and got["imgs"] == 0


def test_the_history_page_colours_each_square_as_its_outcome_and_fits_1280(
        site: Path) -> None:
    got = open_page(site / "history.html")
    assert got["scroll"] <= 1280 and not got["xss"] and got["imgs"] == 0
    assert len(got["squares"]) == 12 * 4 * 4  # one run: a square a cell
    colours = {"o-pass": "rgb(211, 245, 220)", "o-reproduced": "rgb(255, 226, 184)",
               "o-fail": "rgb(255, 210, 210)"}  # base.html.j2's, the badges' colours
    assert {c for c, _, _ in got["squares"]} == colours.keys()
    for css, colour, width in got["squares"]:
        assert colour == colours[css] and width > 5, (css, colour, width)
    assert any(XSS in text for text in got["texts"])


def test_two_renders_are_byte_identical_and_nothing_is_fetched(site: Path) -> None:
    store = RunStore(site.parent)
    again = write_report(store, site.parent / "again")
    first = {p.name: p.read_bytes() for p in site.iterdir()}
    second = {p.name: p.read_bytes() for p in again["index.html"].parent.iterdir()}
    assert first.keys() == second.keys()
    for name in first:
        if name.endswith((".html", ".md")):  # log links are relative to each folder
            continue
        assert first[name] == second[name], name
    rerender = write_report(store, site)
    assert {p.name: p.read_bytes() for p in site.iterdir()} == first
    for page in site.glob("*.html"):
        text = page.read_text()
        assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', text), page
        assert "<img src=x" not in text  # escaped wherever it appears
    assert rerender["md"].read_text().count("<img") == 0

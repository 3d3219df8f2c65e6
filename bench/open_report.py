"""How a report opens in a browser: each page of a report folder loaded in headless Chromium,
timed from navigation to the load event, with what the page's DOM holds then; on the cells
page also the time to filter the long table and to turn its page.

    python bench/open_report.py REPORT_DIR [--pages N]

It prints one markdown table (for docs/benchmarks.md). A probe script is added to a copy of
each page (same folder, so its links hold) and removed after; Chromium is Debian's
``chromium``. Times are wall-clock milliseconds inside the page (``performance.now()``), no
virtual time: what a reader waits.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROBE = """<script>
window.addEventListener("load", () => {
  const out = {load_ms: Math.round(performance.now()),
               elements: document.getElementsByTagName("*").length,
               rows: document.querySelectorAll("tbody tr").length};
  const filter = document.getElementById("filter");
  if (filter && document.getElementById("next")) {
    let t = performance.now();
    filter.value = "REPRODUCED sm_90"; filter.dispatchEvent(new Event("input"));
    out.filter_ms = Math.round(performance.now() - t);
    out.filter_count = document.getElementById("count").textContent;
    t = performance.now();
    document.getElementById("next").click();
    out.next_page_ms = Math.round(performance.now() - t);
    out.page = document.getElementById("page").textContent;
    out.rows_after = document.querySelectorAll("tbody tr").length;
  }
  const pre = document.createElement("pre"); pre.id = "probe";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def open_page(browser: str, page: Path) -> dict[str, Any]:
    probe = page.with_name(f"probe-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    started = time.monotonic()
    try:
        proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                               "--window-size=1280,800", "--dump-dom", probe.as_uri()],
                              capture_output=True, text=True, timeout=300, check=False)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="probe">(.*?)</pre>', proc.stdout, re.S)
    if not found:
        raise SystemExit(f"{page.name}: no probe output: {proc.stderr[-500:]}")
    data: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    data["browser_s"] = round(time.monotonic() - started, 1)
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a report folder (index.html inside)")
    parser.add_argument("--pages", type=int, default=2,
                        help="failure-table pages to open per failure (default: 2)")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("needs Chromium (Debian: apt-get install chromium)")
    pages = [args.report / "index.html", args.report / "cells.html"]
    for first in sorted(args.report.glob("failure-*.html")):
        if not re.search(r"-\d+\.html$", first.name):  # a failure's first page
            pages += [first, *[first.with_name(f"{first.stem}-{i}.html")
                               for i in range(2, args.pages + 1)]]
    print("| page | size | load (ms) | DOM elements | table rows | filter (ms) | next page (ms) "
          "| browser process (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for page in pages:
        if not page.is_file():
            continue
        got = open_page(browser, page)
        size = page.stat().st_size / 2 ** 20
        print(f"| {page.name} | {size:.1f} MiB | {got['load_ms']:,} | {got['elements']:,} | "
              f"{got['rows']:,} | {got.get('filter_ms', '')} | {got.get('next_page_ms', '')} "
              f"| {got['browser_s']} |", flush=True)
        if "filter_count" in got:
            print(f"<!-- {page.name}: filter 'REPRODUCED sm_90' -> {got['filter_count']}; "
                  f"next -> {got['page']}, {got['rows_after']} rows -->", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

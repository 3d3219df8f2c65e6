"""Screenshots of a report site for the docs, in a 1280×800 headless Chromium window.

    python bench/screenshots.py [REPORT_DIR]     # default: reports/latest

writes docs/site-index.png (the index) and docs/site-mergekit.png (the mergekit page), the
first screen a new user sees after the README's main job.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {"index.html": "site-index.png", "failure-mergekit_fp16.html": "site-mergekit.png"}


def main() -> int:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "reports" / "latest").resolve()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("needs chromium (apt-get install chromium)", file=sys.stderr)
        return 1
    for page, png in PAGES.items():
        if not (site / page).is_file():
            print(f"{site / page}: no such page", file=sys.stderr)
            return 1
        out = ROOT / "docs" / png
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--window-size=1280,800",
                        f"--screenshot={out}", (site / page).as_uri()],
                       check=True, capture_output=True, timeout=120)
        print(f"{out} <- {site / page}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The picture in the README: the page's first screen, as a browser shows it, written to docs/page.png.

    .venv/bin/python docs/page_picture.py                                  # the README's picture
    .venv/bin/python docs/page_picture.py --link "preset=idle-gpus" --out /tmp/idle.png

Starts a real `streamlit run app.py` and headless Chromium, with the same helpers as the browser tests
and tests/browser/screenshots.py, opens one link in a fresh session, waits until the page has drawn, and
saves what shows without scrolling: the first tab, light theme, 1400 × 900.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
from conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, VIEWPORT, streamlit_server  # noqa: E402
from screenshots import settle  # noqa: E402

LINK = "gpus=4&train=true"  # 4 GPUs, training: the last batch of 10 rows splits 3, 3, 3, 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--link", default=LINK, help=f"the page's query string (default {LINK})")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "page.png")
    args = parser.parse_args()
    ARTIFACTS.mkdir(exist_ok=True)
    with streamlit_server(ARTIFACTS / "page_picture.log") as (_, url), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT, color_scheme="light")
            page.set_default_timeout(120_000)
            page.goto(f"{url}/?{args.link}")
            settle(page)
            page.screenshot(path=str(args.out))
        finally:
            browser.close()
    print(args.out)


if __name__ == "__main__":
    main()

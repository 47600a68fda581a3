"""Screenshots of every page a lesson shows, as a class would see them: each tab, light and dark, a projector's
1024 × 768 and a laptop's widths, with and without Presenting.

    .venv/bin/python tests/browser/screenshots.py                        # every page below, into test-artifacts/screens/
    .venv/bin/python tests/browser/screenshots.py --links "gpus=8&train=true" "preset=idle-gpus" --widths 1024
    .venv/bin/python tests/browser/screenshots.py --opening-only          # each page's first tab only: quicker

The default pages: the tutorial's defaults; DataParallel on 2, 8 and 16 GPUs with training; DDP on 4 ranks
with training; both engines compared; and every preset (each opens on the tab that shows its lesson).
Starts a real `streamlit run app.py` and headless Chromium (the same ones the browser tests use), opens
each link in a fresh session, and for every tab saves a screenshot of the first screen (what shows
without scrolling), or of the whole page with --whole. Nothing is asserted here: the browser tests check
what can be checked; this is for looking. Files are named link_theme_width_presenting_tab.png.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, ROOT, _healthy, free_port  # noqa: E402
from dpviz.presets import LINK_PRESETS  # noqa: E402

WIDTHS = {1400: 900, 1024: 768, 800: 700}  # window width: height (1024 × 768: a projector)
LINKS = ["", "gpus=2&train=true", "gpus=8&train=true", "gpus=16&train=true", "engine=ddp&gpus=4&train=true",
         "engine=compare&engines=dp,ddp", "engine=compare&engines=zero1,fsdp"] + [f"preset={name}" for name in LINK_PRESETS]
PRESENTING = "Presenting: larger text in the charts"  # the sidebar's switch
READY = "[data-testid=stApp][data-test-script-state=notRunning]"


def settle(page) -> None:
    """Until the script has run and plotly has drawn what it was sent."""
    page.wait_for_timeout(400)
    page.wait_for_selector(READY, timeout=120_000)
    page.wait_for_timeout(700)


def shoot(url: str, links: list[str], widths: list[int], themes: list[str], presenting: list[bool], out: Path,
          whole: bool, opening_only: bool) -> list[Path]:
    saved = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for link in links:
            for theme in themes:
                for width in widths:
                    for larger in presenting:
                        saved += shoot_page(browser, url, link, theme, width, larger, out, whole, opening_only)
        browser.close()
    return saved


def shoot_page(browser, url: str, link: str, theme: str, width: int, larger: bool, out: Path, whole: bool,
               opening_only: bool) -> list[Path]:
    """One link in a fresh session: the tab it opens on first, then every other tab."""
    height = WIDTHS.get(width, 800)
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=theme)
    page = context.new_page()
    page.set_default_timeout(180_000)  # a DDP run starts processes; a tab's first view can take a while
    page.goto(f"{url}/?{link}")
    settle(page)
    if larger:
        page.get_by_role("switch", name=PRESENTING).click(force=True)
        settle(page)
    opening = page.locator("[role=tab][aria-selected=true]").inner_text().strip()
    tabs = [opening] + ([] if opening_only else [t.strip() for t in page.get_by_role("tab").all_inner_texts()
                                                  if t.strip() != opening])
    saved = []
    for tab in tabs:
        if tab != opening:
            page.get_by_role("tab", name=tab, exact=True).click()
            settle(page)
        name = "_".join([link.replace("&", "_").replace("=", "-") or "default", theme, str(width),
                         "presenting" if larger else "plain", tab.replace(" ", "-")])
        path = out / f"{name}.png"
        if whole:  # the page's main area scrolls itself: grow the window to its height instead
            tall = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
            page.set_viewport_size({"width": width, "height": max(tall, height)})
            page.wait_for_timeout(500)
        page.screenshot(path=str(path))
        if whole:
            page.set_viewport_size({"width": width, "height": height})
        saved.append(path)
    context.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", nargs="+", default=LINKS, help="query strings, one page each")
    parser.add_argument("--widths", nargs="+", type=int, default=list(WIDTHS))
    parser.add_argument("--themes", nargs="+", default=["light", "dark"], choices=["light", "dark"])
    parser.add_argument("--presenting", nargs="+", default=["off", "on"], choices=["off", "on"],
                        help="the Presenting switch off (plain charts), on (larger type), or both")
    parser.add_argument("--opening-only", action="store_true", help="only the tab each page opens on")
    parser.add_argument("--whole", action="store_true", help="the whole page, not only the first screen")
    parser.add_argument("--out", type=Path, default=ARTIFACTS / "screens")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _healthy(url):
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("streamlit did not start")
            time.sleep(0.2)
        saved = shoot(url, args.links, args.widths, args.themes, [p == "on" for p in args.presenting], args.out,
                      args.whole, args.opening_only)
        for path in saved:
            print(path)
        print(f"{len(saved)} screenshots in {args.out}", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()

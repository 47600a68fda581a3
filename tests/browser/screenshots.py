"""Screenshots of every tab, as a class would see them: light and dark, projector and laptop widths.

    .venv/bin/python tests/browser/screenshots.py                       # the default sets, into test-artifacts/screens/
    .venv/bin/python tests/browser/screenshots.py --links "gpus=16&train=true" --widths 800 --themes dark

Starts a real `streamlit run app.py` and headless Chromium (the same ones the browser tests use), opens
each link in a fresh session, and for every tab saves a screenshot of the first screen (what shows
without scrolling) and of the whole page. Nothing is asserted here: the browser tests check what can be
checked; this is for looking.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, ROOT, _healthy, free_port  # noqa: E402

WIDTHS = {1400: 900, 1024: 768, 800: 700}  # window width: height (1024 × 768: a projector)
LINKS = ["gpus=2", "gpus=8&train=true", "gpus=16&train=true", "gpus=16"]
READY = "[data-testid=stApp][data-test-script-state=notRunning]"


def settle(page) -> None:
    """Until the script has run and plotly has drawn what it was sent."""
    page.wait_for_timeout(400)
    page.wait_for_selector(READY, timeout=120_000)
    page.wait_for_timeout(700)


def shoot(url: str, links: list[str], widths: list[int], themes: list[str], out: Path, whole: bool) -> list[Path]:
    saved = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        for link in links:
            for theme in themes:
                for width in widths:
                    context = browser.new_context(viewport={"width": width, "height": WIDTHS.get(width, 800)},
                                                  color_scheme=theme)
                    page = context.new_page()
                    page.set_default_timeout(120_000)  # a tab's first view can take a while on a busy machine
                    page.goto(f"{url}/?{link}")
                    settle(page)
                    tabs = page.get_by_role("tab").all_inner_texts()
                    for tab in tabs:
                        page.get_by_role("tab", name=tab, exact=True).click()
                        settle(page)
                        name = f"{link.replace('&', '_').replace('=', '-')}_{theme}_{width}_{tab.replace(' ', '-')}"
                        path = out / f"{name}.png"
                        if whole:  # the page's main area scrolls itself: grow the window to its height instead
                            tall = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
                            page.set_viewport_size({"width": width, "height": max(tall, WIDTHS.get(width, 800))})
                            page.wait_for_timeout(500)
                        page.screenshot(path=str(path))
                        if whole:
                            page.set_viewport_size({"width": width, "height": WIDTHS.get(width, 800)})
                        saved.append(path)
                    context.close()
        browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", nargs="+", default=LINKS, help="query strings, one page each")
    parser.add_argument("--widths", nargs="+", type=int, default=list(WIDTHS))
    parser.add_argument("--themes", nargs="+", default=["light", "dark"], choices=["light", "dark"])
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
        for path in shoot(url, args.links, args.widths, args.themes, args.out, args.whole):
            print(path)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()

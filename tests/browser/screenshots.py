"""Screenshots of every page a lesson shows, as a class would see them: each tab, light and dark, a projector's
1024 × 768 and a laptop's widths, with and without Presenting; and index.html beside them, a grid of the shots.

    .venv/bin/python tests/browser/screenshots.py                        # every page below, into test-artifacts/screens/
    .venv/bin/python tests/browser/screenshots.py --widths 1024 --themes light --presenting on   # a projector's
    .venv/bin/python tests/browser/screenshots.py --links "gpus=8&train=true" "preset=idle-gpus" --widths 1024
    .venv/bin/python tests/browser/screenshots.py --opening-only          # each page's first tab only: quicker

The default pages: every engine's own (the tutorial's defaults, and each engine on 4 devices with training);
DataParallel on 2, 8 and 16 GPUs with training; a few pairs of engines compared; Memory, every engine; and every
preset (each opens on the tab that shows its lesson). Starts a real `streamlit run app.py` and headless Chromium
(the same ones the browser tests use), opens each link in a fresh session, and for every tab saves a screenshot
of the first screen (what shows without scrolling), or of the whole page with --whole; a page without tabs
(Memory, every engine) is one shot. Nothing is asserted here: the browser tests check what can be checked; this
is for looking: open index.html, each thumbnail captioned with its link and tab and opening its PNG. Files are
named link_theme_width_presenting_tab.png.
"""
from __future__ import annotations

import argparse
import html
import subprocess
import sys
import time
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import waits  # noqa: E402
from conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, ROOT, _healthy, free_port  # noqa: E402
from dpviz.engines import ENGINES  # noqa: E402
from dpviz.presets import LINK_PRESETS  # noqa: E402

WIDTHS = {1400: 900, 1024: 768, 800: 700}  # window width: height (1024 × 768: a projector)
NAMES = list(ENGINES)  # every engine in the registry, one added meanwhile too
LINKS = ([""] + [f"engine={name}" for name in NAMES[1:]] + [f"engine={name}&gpus=4&train=true" for name in NAMES]
         + ["gpus=2&train=true", "gpus=8&train=true", "gpus=16&train=true"]
         + [f"engine=compare&engines={a},{b}" for a, b in zip(NAMES, NAMES[1:])]  # each engine beside the next
         + ["engine=memory", "engine=memory&gpus=4&train=true&optimizer=adam"]
         + [f"preset={name}" for name in LINK_PRESETS])
CAPTIONS: dict[Path, str] = {}  # each shot's link, tab, theme, width and Presenting, for the index


# Every chart shown drawn at the window's width (waits.DRAWN: a busy machine's shots caught a grey skeleton where the
# lesson's chart would be), or this long after the run, when the shot is taken as it is: this is for looking, not a test
DRAWN_WAIT_MS = 60_000


def settle(page, runs_before: int) -> None:
    """Until the script's run after the `runs_before`th has ended and plotly has drawn what it was sent."""
    waits.idle(page, runs_before)  # the page's own timeout: a page of every engine runs each of them
    drawn(page)


def drawn(page) -> None:
    try:
        waits.drawn(page, timeout=DRAWN_WAIT_MS)
    except PlaywrightTimeout:
        pass


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
    context = waits.watched(browser.new_context(viewport={"width": width, "height": height}, color_scheme=theme))
    page = context.new_page()
    page.set_default_timeout(600_000)  # a run starts processes, Memory every engine four engines': minutes when busy
    page.goto(f"{url}/?{link}{'&' if link else ''}presenting={'true' if larger else 'false'}")  # the link's own switch
    settle(page, 0)  # the page's count starts with it
    # A page without tabs (Memory, every engine) is one shot, named for the page.
    has_tabs = page.locator("[role=tab][aria-selected=true]").count() > 0
    opening = page.locator("[role=tab][aria-selected=true]").inner_text().strip() if has_tabs else "page"
    tabs = [opening] + ([] if opening_only or not has_tabs else
                        [t.strip() for t in page.get_by_role("tab").all_inner_texts() if t.strip() != opening])
    saved = []
    for tab in tabs:
        if tab != opening:  # another tab: a rerun (the page's tabs rerun on change)
            runs = waits.runs_finished(page)
            page.get_by_role("tab", name=tab, exact=True).click()
            settle(page, runs)
        name = "_".join([link.replace("&", "_").replace("=", "-") or "default", theme, str(width),
                         "presenting" if larger else "plain", tab.replace(" ", "-")])
        path = out / f"{name}.png"
        if whole:  # the page's main area scrolls itself: grow the window to its height instead
            tall = page.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
            page.set_viewport_size({"width": width, "height": max(tall, height)})
            drawn(page)
        page.screenshot(path=str(path))
        if whole:
            page.set_viewport_size({"width": width, "height": height})
        saved.append(path)
        CAPTIONS[path] = f"?{link} · {tab} · {theme}, {width} px, Presenting {'on' if larger else 'off'}"
    context.close()
    return saved


def index(out: Path, saved: list[Path], captions: dict[Path, str]) -> Path:
    """index.html beside the shots: a grid of thumbnails, each captioned with its link and tab and opening its PNG."""
    cells = "\n".join(
        f'<figure><a href="{html.escape(p.name)}"><img src="{html.escape(p.name)}" loading="lazy"></a>'
        f"<figcaption>{html.escape(captions[p])}</figcaption></figure>" for p in saved)
    page = f"""<!doctype html><meta charset="utf-8"><title>dpviz screenshots</title>
<style>body{{font:14px sans-serif;margin:1rem}} main{{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:1rem}}
figure{{margin:0}} img{{width:100%;border:1px solid #ccc}} figcaption{{overflow-wrap:anywhere}}</style>
<h1>dpviz: {len(saved)} first screens</h1><main>
{cells}
</main>"""
    path = out / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


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
        print(f"{len(saved)} screenshots in {args.out}; open {index(args.out, saved, CAPTIONS)}", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()

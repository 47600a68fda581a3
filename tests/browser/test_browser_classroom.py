"""The page as a class sees it: on a projector's first screen, on narrow windows, in the dark theme.

    .venv/bin/python -m pytest tests/browser/test_browser_classroom.py -q

What can be checked of a screenshot is checked here, in the real page: a chart on the first screen at
1024 × 768, no key figure cut off at 1024 or 800 pixels wide, the shown tab kept when a batch or a control
changes, and chart text that reads on the dark theme's background. tests/browser/screenshots.py takes
the screenshots to look at.
"""
from __future__ import annotations

import pytest

import waits
from test_browser import ACTIVE_PANEL, SVG, assert_no_exception, open_page

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}


def fresh(browser, app_url, viewport: dict, scheme: str = "light"):
    """A new session's context, counting the script's runs (waits.py), and its page."""
    context = waits.watched(browser.new_context(viewport=viewport, base_url=app_url, color_scheme=scheme))
    page = context.new_page()
    page.set_default_timeout(120_000)
    return context, page


def test_a_projector_first_screen_shows_a_chart(browser, app_url):
    context, page = fresh(browser, app_url, PROJECTOR)
    try:
        open_page(page)
        plot = page.locator(f"{ACTIVE_PANEL} {SVG}").first.bounding_box()
        assert plot is not None
        visible = min(plot["y"] + plot["height"], PROJECTOR["height"]) - plot["y"]
        # The chart starts on the first screen and at least 250 px of it (its title and the plot's top) show.
        assert plot["y"] < PROJECTOR["height"] - 250 and visible >= 250, plot
    finally:
        context.close()


@pytest.mark.parametrize("width", [1024, 800])
@pytest.mark.parametrize("query", ["", "?gpus=8&train=true", "?engine=ddp&gpus=3&train=true"])
def test_no_key_figure_is_cut_off(browser, app_url, width, query):
    context, page = fresh(browser, app_url, {"width": width, "height": 800})
    try:
        open_page(page, query)
        assert_no_exception(page)
        metrics = page.locator("[data-testid=stMetric]")
        assert metrics.count() >= 4
        cut = page.evaluate("""() => [...document.querySelectorAll(
            '[data-testid=stMetricValue] *, [data-testid=stMetricLabel] *, [data-testid=stMetricValue], [data-testid=stMetricLabel]')]
            .filter(e => e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1)
            .filter(e => getComputedStyle(e).overflow !== 'visible' || getComputedStyle(e).textOverflow === 'ellipsis')
            .map(e => e.innerText)""")
        assert cut == [], f"cut off at {width} px: {cut}"
        main = page.locator("[data-testid=stMain]").bounding_box()
        for box in (metrics.nth(i).bounding_box() for i in range(metrics.count())):
            assert box["x"] >= main["x"] and box["x"] + box["width"] <= main["x"] + main["width"] + 1, box
    finally:
        context.close()


def test_the_shown_tab_is_kept_when_a_batch_or_a_control_changes(browser, app_url):
    context, page = fresh(browser, app_url, {"width": 1400, "height": 900})
    selected = lambda: page.locator("[role=tab][aria-selected=true]").inner_text().strip()
    try:
        open_page(page)
        for tab in ("Memory", "Inputs"):
            waits.tab_shown(page, tab)  # a rerun of its own, ended before the batch is chosen
            panel = page.locator(ACTIVE_PANEL)
            choice = panel.locator("[data-testid=stRadio] label").filter(has_text="batch 1 of 4")
            # a batch already chosen (the tabs share it) is no change: no run to wait for
            waits.rerun(page, choice.click, reruns=not choice.locator("input").is_checked())
            assert selected() == tab
        waits.rerun(page, lambda: page.get_by_role("switch", name="Shuffle").click(force=True))  # a control: a new run
        assert selected() == "Inputs"
        waits.rerun(page, lambda: page.get_by_role("switch", name="Train: loss, backward, step").click(force=True))
        assert selected() == "Inputs"
        assert_no_exception(page)
    finally:
        context.close()


CONTRAST = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(c => c / 255).map(c => c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4)
      .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const page = rgb(getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor);
  const worst = [];
  for (const svg of document.querySelectorAll('[data-testid=stTabPanel]:not([data-st-inactive]) [data-testid=stPlotlyChart] .main-svg')) {
    // plotly paints the paper as the first svg's own background; transparent shows the page through.
    const paper = rgb(getComputedStyle(svg.parentElement.querySelector('.main-svg')).backgroundColor);
    const back = paper.length >= 3 && (paper.length < 4 || paper[3] > 0.5) ? paper.slice(0, 3) : page;
    // Text off the marks: the title, the axes, the legend and annotations without a box of their own.
    for (const t of svg.querySelectorAll('.gtitle, .g-gtitle text, .xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .legendtext, .annotation-text-g text')) {
      const box = t.closest('.annotation') && t.closest('.annotation').querySelector('.bg');
      if (box && rgb(getComputedStyle(box).fill).length >= 3 && (rgb(getComputedStyle(box).fill)[3] ?? 1) > 0) continue;
      const color = rgb(getComputedStyle(t).fill);
      if (color.length >= 4 && color[3] === 0) continue;
      const r = ratio(color.slice(0, 3), back);
      if (r < 4.5) worst.push([t.textContent.slice(0, 40), r.toFixed(2)]);
    }
  }
  return worst;
}"""


@pytest.mark.parametrize("query", ["?gpus=8&train=true", "?gpus=16&train=true"])
def test_chart_text_reads_on_the_dark_theme(browser, app_url, query):
    context, page = fresh(browser, app_url, {"width": 1400, "height": 900}, scheme="dark")
    try:
        open_page(page, query)
        tabs = page.get_by_role("tab").all_inner_texts()
        assert "Flow" in tabs
        failing = {}
        for tab in tabs:
            if tab.strip() == "Tutorial log":
                continue
            waits.tab_shown(page, tab.strip())
            page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}")
            low = page.evaluate(CONTRAST)
            if low:
                failing[tab] = low[:5]
        assert failing == {}, f"chart text under 4.5:1 on the dark background: {failing}"
    finally:
        context.close()

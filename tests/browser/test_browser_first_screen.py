"""A projector's first screen: at 1024 × 768, every page shows its chart without scrolling, opens on the tab
that shows its lesson, and cuts or breaks nothing.

    .venv/bin/python -m pytest tests/browser/test_browser_first_screen.py -q

Measured in the real page: the plot area (plotly's own layout of the drawn chart) against the window, the
tab shown against the preset's, the tab strip's width against its box, the text of metrics and boxes.
"""
from __future__ import annotations

import re

import pytest

from dpviz.figures.views import views_of
from dpviz.presets import ALL_PRESETS, EVERY_ENGINE, LINK_PRESETS
from test_browser import ACTIVE_PANEL, IDLE, SVG, assert_no_exception

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1024, "height": 768}
SELECTED = "[role=tab][aria-selected=true]"

# The shown tab's first chart: its box, and its plot area (the axes' domain) as plotly laid it out.
PLOT_AREA = f"""() => {{
  // a page of tabs: the shown tab's chart; the page of every engine's memory has one chart and no tabs
  const plot = document.querySelector('{ACTIVE_PANEL} .js-plotly-plot') || document.querySelector('.js-plotly-plot');
  const box = plot.getBoundingClientRect(), size = plot._fullLayout._size;
  return {{top: box.top, plotTop: box.top + size.t, plotBottom: box.top + size.t + size.h,
           scrolled: document.querySelector('[data-testid=stMain]').scrollTop}};
}}"""


def opened(browser, app_url, query: str, width: int = PROJECTOR["width"], height: int = PROJECTOR["height"]):
    """A fresh session on `query` at width × height, once its script has run and its shown tab has drawn."""
    context = browser.new_context(viewport={"width": width, "height": height}, base_url=app_url)
    page = context.new_page()
    page.set_default_timeout(180_000)  # a DDP preset starts real processes; a busy machine takes its time
    page.goto(f"/?{query}")
    shown = SVG if every_engine(query) else f"{ACTIVE_PANEL} {SVG}"  # that page has no tabs
    page.wait_for_selector(f"{shown}, [data-testid=stException]")
    page.wait_for_selector(IDLE)
    return context, page


def every_engine(query: str) -> bool:
    """Whether the link opens the page of every engine's memory (a preset whose lesson is read there)."""
    name = query.split("=", 1)[1] if query.startswith("preset=") else None
    return name in LINK_PRESETS and LINK_PRESETS[name].opens == EVERY_ENGINE


def preset_tab(name: str) -> str:
    """The tab a preset's run opens on, as the page labels it (Split per step under DDP)."""
    preset = LINK_PRESETS[name]
    if preset.opens == "compare":
        return "Compare"
    view = next(v for v in views_of(preset.config) if v.key == preset.opens)  # an engine's own views too (it names its engine)
    return view.tab.replace("per batch", f"per {'step' if preset.config.engine == 'ddp' else 'batch'}")


def assert_the_first_screen_shows_the_chart(page, query: str) -> None:
    """At 1024 × 768 with the page at its top: the shown tab's whole plot area on the first screen and, for a preset,
    the tab that shows its lesson, named in the banner above the tabs. test_browser_layout.py asks it of every
    engine's page and every preset, on the session it reads at every width (one run for both)."""
    assert page.viewport_size == PROJECTOR, page.viewport_size
    assert_no_exception(page)
    area = page.evaluate(PLOT_AREA)
    assert area["scrolled"] == 0
    # The whole plot area, from its top to its bottom axis, is on the first screen.
    assert 0 < area["plotTop"] < area["plotBottom"] <= PROJECTOR["height"], area
    if query.startswith("preset="):  # the tab that shows the lesson, named in the banner above the tabs
        name = query.split("=", 1)[1]
        if every_engine(query):
            tab = "Memory, every engine"
            assert page.locator(SELECTED).count() == 0
        else:
            tab = page.locator(SELECTED).inner_text().strip()
            assert tab == preset_tab(name)
        banner = page.locator("[data-testid=stAlertContentInfo]").first.inner_text()
        assert f"{LINK_PRESETS[name].title}." in banner and f"Shown in {tab}" in banner


# Every engine's page and every preset are asked this by test_browser_layout.py; these two are opened only here.
@pytest.mark.parametrize("query", ["", "engine=ddp&gpus=4&train=true"])
def test_the_first_screen_shows_the_chart(browser, app_url, query):
    context, page = opened(browser, app_url, query)
    try:
        assert_the_first_screen_shows_the_chart(page, query)
    finally:
        context.close()


def test_ddp_padding_opens_on_the_sample_map(browser, app_url):
    context, page = opened(browser, app_url, "preset=ddp-padding")
    try:
        assert page.locator(SELECTED).inner_text().strip() == "Sample map"
        assert "Shown in Sample map" in page.locator("[data-testid=stAlertContentInfo]").first.inner_text()
        # Under the chart, what to look for, and the link to the preset.
        look = page.locator("[data-testid=stAlertContentInfo]").filter(has_text="Link to this preset")
        assert "repeats the first 2 rows" in look.inner_text()
    finally:
        context.close()


def test_a_preset_button_opens_its_tab_after_another_was_clicked(browser, app_url):
    context, page = opened(browser, app_url, "", width=1400, height=900)
    try:
        page.get_by_role("tab", name="Memory", exact=True).click()
        page.wait_for_function("() => document.querySelector('[role=tab][aria-selected=true]')?.innerText.trim() === 'Memory'")
        page.wait_for_selector(IDLE)
        page.get_by_role("button", name=ALL_PRESETS["idle-gpus"].title).click()
        page.wait_for_function("() => location.search.includes('gpus=8')")
        page.wait_for_selector(IDLE)
        page.wait_for_selector(f"{ACTIVE_PANEL} {SVG}")
        assert page.locator(SELECTED).inner_text().strip() == preset_tab("idle-gpus")
    finally:
        context.close()


@pytest.mark.parametrize("query", ["preset=scalar-loss", "engine=both", "preset=ddp-padding"])
def test_the_tab_strip_is_whole_at_1024(browser, app_url, query):
    context, page = opened(browser, app_url, query)
    try:
        strip = page.locator("[data-testid=stTabs] [role=tablist]").first.evaluate(
            "e => [e.scrollWidth, e.clientWidth]")
        assert strip[0] <= strip[1], strip  # no tab behind the strip's scroll arrow
        last = page.get_by_role("tab").last.bounding_box()
        assert last["x"] + last["width"] <= PROJECTOR["width"]
    finally:
        context.close()


# Text that would break between a number and its unit ("96 / B"): a plain space before a byte unit.
SPLIT_UNIT = re.compile(r"\d [KMGT]?i?B\b")


@pytest.mark.parametrize("query", ["gpus=8&train=true", "engine=ddp&gpus=4&train=true"])
def test_numbers_keep_their_units_and_words_are_not_hyphenated(browser, app_url, query):
    context, page = opened(browser, app_url, query)
    try:
        page.locator("[data-testid=stMetric]").first.wait_for()
        texts = page.locator("[data-testid=stMetricValue], [data-testid=stMarkdownContainer]").all_inner_texts()
        assert not [t for t in texts if SPLIT_UNIT.search(t)], [t for t in texts if SPLIT_UNIT.search(t)][:3]
        hyphens = page.locator("[data-testid=stAlertContainer]").evaluate_all(
            "els => els.flatMap(e => [e, ...e.querySelectorAll('*')]).map(e => getComputedStyle(e).hyphens)")
        assert hyphens and set(hyphens) <= {"manual", "none"}, set(hyphens)
    finally:
        context.close()


@pytest.mark.parametrize("width", [1400, 1024])
def test_no_metric_is_cut_on_a_run_with_memory(browser, app_url, width):
    context, page = opened(browser, app_url, "gpus=8&train=true", width=width, height=900)
    try:
        metrics = page.locator("[data-testid=stMetric]")
        metrics.first.wait_for()
        assert "memory peak, GPU 0" in " ".join(metrics.all_inner_texts())
        cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stMetric] *')]
            .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflow !== 'visible')
            .map(e => e.innerText)""")
        assert cut == [], cut
        assert "…" not in " ".join(metrics.all_inner_texts())
    finally:
        context.close()


def test_no_deploy_button(browser, app_url):
    context, page = opened(browser, app_url, "")
    try:
        assert page.get_by_role("button", name="Deploy").count() == 0
        assert page.locator("[data-testid=stAppDeployButton]").count() == 0
    finally:
        context.close()

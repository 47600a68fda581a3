"""Presenting on a projector's 1024 × 768: every engine's page (each engine in the registry, Memory every engine,
two engines compared) opened by a link in Presenting shows its opening tab's chart whole on the first screen, and
every other tab's plot (its lesson: the axes' domain, as plotly laid it out) there too.

    .venv/bin/python -m pytest tests/browser/test_browser_presenting_fits.py -q -n 0

Measured in the real page, as test_browser_first_screen.py measures it: the chart's box and plotly's own plot area
against the window, the page scrolled to its top. One page is opened per test and its tabs clicked in turn.
"""
from __future__ import annotations

import pytest

from dpviz.engines import ENGINES
from test_browser import ACTIVE_PANEL, IDLE, SVG, assert_no_exception
from test_browser_classroom import PROJECTOR, fresh

pytestmark = pytest.mark.browser

NAMES = list(ENGINES)
PAGES = ([f"engine={name}" for name in NAMES] + ["engine=memory"]
         + [f"engine=compare&engines={a},{b}" for a, b in [("dp", "ddp"), ("zero1", "fsdp"), ("ddp", "pipeline")]])
RUN_TIMEOUT_MS = 600_000  # Memory every engine runs each engine's processes: minutes on a busy machine
# Pages whose opening chart does not fit yet, measured at 1024 × 768 in Presenting (the chart's bottom edge): each
# leaves this list when it fits, which the strict mark then demands.
OPENING_NOT_YET = {
}
# Tabs past the opening one whose plot still runs past the fold in Presenting (DataParallel's Step through at 786 px
# and Memory at 986, the pipeline's Timeline 838, Step through 876 and Memory 1,025, the Timelines and Memory tabs
# of DDP, ZeRO-1 and FSDP): measured, not yet fixed.
OTHER_TABS_NOT_YET = "Step through, Timeline and Memory tabs still run past 768 px in Presenting"

# The shown chart (the shown tab's, or the page's only one): its box and plotly's plot area, in the window.
CHART = f"""() => {{
  const plot = document.querySelector('{ACTIVE_PANEL} .js-plotly-plot') || document.querySelector('.js-plotly-plot');
  if (!plot) return null;
  const box = plot.getBoundingClientRect(), size = plot._fullLayout._size;
  return {{top: box.top, bottom: box.bottom, plotBottom: box.top + size.t + size.h,
           font: plot._fullLayout.font.size, scrolled: document.querySelector('[data-testid=stMain]').scrollTop}};
}}"""


def drawn(page) -> dict:
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE)
    page.wait_for_timeout(500)  # plotly's own drawing after the script has run
    return page.evaluate(CHART)


def opened(browser, app_url, query):
    context, page = fresh(browser, app_url, PROJECTOR)
    page.set_default_timeout(RUN_TIMEOUT_MS)
    page.goto(f"/?{query}&presenting=true")
    page.wait_for_selector(f"{SVG}, [data-testid=stException]")
    return context, page


@pytest.mark.parametrize("query", [pytest.param(q, marks=[pytest.mark.xfail(reason=OPENING_NOT_YET[q], strict=True)]
                                                if q in OPENING_NOT_YET else []) for q in PAGES])
def test_presenting_at_1024_the_opening_chart_is_on_the_first_screen(browser, app_url, query):
    context, page = opened(browser, app_url, query)
    try:
        opening = drawn(page)
        assert_no_exception(page)
        assert page.get_by_role("switch", name="Presenting: larger text in the charts").is_checked()
        assert "presenting=true" in page.url  # the page's link keeps it
        assert opening["font"] > 16 and opening["scrolled"] == 0  # drawn in Presenting's larger type
        # the opening chart whole, its notes and legend too
        assert opening["bottom"] <= PROJECTOR["height"], f"the opening chart ends at {opening['bottom']:.0f} px"
    finally:
        context.close()


@pytest.mark.xfail(reason=OTHER_TABS_NOT_YET, strict=False)
@pytest.mark.parametrize("query", ["engine=dp", "engine=pipeline"])
def test_presenting_at_1024_every_other_tabs_plot_is_on_the_first_screen(browser, app_url, query):
    context, page = opened(browser, app_url, query)
    try:
        drawn(page)
        problems = []
        tabs = [t.strip() for t in page.get_by_role("tab").all_inner_texts()]
        shown = page.locator("[role=tab][aria-selected=true]").inner_text().strip() if tabs else None
        for tab in [t for t in tabs if t != shown]:
            page.get_by_role("tab", name=tab, exact=True).click()
            chart = drawn(page)
            assert_no_exception(page)
            if chart is None:  # a tab of text (the tutorial log)
                continue
            if not chart["plotBottom"] <= PROJECTOR["height"]:  # its lesson: the plot, if not every note under it
                problems.append(f"{tab}: the plot ends at {chart['plotBottom']:.0f} px")
        assert not problems, "; ".join(problems)
    finally:
        context.close()

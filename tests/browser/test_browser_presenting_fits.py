"""Presenting on a projector's 1024 × 768: every engine's page (each engine in the registry, Memory every engine,
two engines compared) opened by a link in Presenting shows its opening tab's chart whole on the first screen, and
every other tab's plot (its lesson: the axes' domain, as plotly laid it out) there too.

    .venv/bin/python -m pytest tests/browser/test_browser_presenting_fits.py -q -n 0

Measured in the real page, as test_browser_first_screen.py measures it: the chart's box and plotly's own plot area
against the window, the page scrolled to its top. Each page is opened once for both tests, its tabs clicked in turn.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from dpviz.engines import ENGINES
from dpviz.figures.views import views_of
from dpviz.page.tabs import COMPARE
from test_browser import ACTIVE_PANEL, IDLE, SVG
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
# Tabs whose lesson needs training and every rank: each engine's page again on 4 devices with training (One step's
# four lanes, the optimizer's state in Memory, the backward in Timeline and Step through).
TRAINED = [f"engine={name}&gpus=4&train=true" for name in NAMES if name not in ("zero1",)]  # ZeRO-1 opens training
EVERY_ENGINE = "Memory, every engine"  # the page of every engine's memory: one chart, no tabs


def tabs_of(query: str) -> list[str]:
    """The tabs with a chart that `query`'s page shows (its views; the tutorial log's text, and views shown only for some runs,
    the Pitfall and the Mesh, left out), as
    the registry of views names them: the test fails if the page lacks one."""
    params = dict(part.split("=", 1) for part in query.split("&"))
    if params["engine"] == "memory":
        return [EVERY_ENGINE]
    names = params["engines"].split(",") if params["engine"] == "compare" else [params["engine"]]
    views = views_of(*[SimpleNamespace(engine=name) for name in names])
    return ([COMPARE] if len(names) > 1 else []) + [
        v.tab for v in views if v.key != "log" and v.shown is None and any(name in v.engines for name in names)]


# Tabs whose plot does not fit yet, measured (the plot's bottom at 1024 × 768, Presenting): strict, each leaves
# this list when it fits.
PLOT_NOT_YET: dict[tuple[str, str], str] = {}

CASES = [pytest.param(query, tab, id=f"{query}-{tab}")
         for query in PAGES + TRAINED for tab in tabs_of(query)]
PLOT_CASES = [pytest.param(*case.values, id=case.id,
                           marks=[pytest.mark.xfail(reason=PLOT_NOT_YET[case.values], strict=True)]
                           if case.values in PLOT_NOT_YET else []) for case in CASES]

# The shown chart (the shown tab's, or the page's only one): its box and plotly's plot area, in the window.
CHART = f"""() => {{
  const plot = document.querySelector('{ACTIVE_PANEL} .js-plotly-plot') || document.querySelector('.js-plotly-plot');
  if (!plot) return null;
  const box = plot.getBoundingClientRect(), size = plot._fullLayout._size;
  const legends = [...plot.querySelectorAll('.legend')].map(l => l.getBoundingClientRect()).filter(r => r.height > 0);
  return {{top: box.top, bottom: box.bottom, plotBottom: box.top + size.t + size.h,
           legendTop: legends.length ? Math.min(...legends.map(r => r.top)) : null,
           // plotly draws a legend's scrollbar only where its entries run past the height it was given
           legendScrolls: [...plot.querySelectorAll('.legend rect.scrollbar')].some(r => +r.getAttribute('height') > 0),
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
    found = measured(browser, app_url, query)
    opening = found["_shown"]
    assert not found["_exception"], "the page showed an exception"
    assert found["_switched"]  # the sidebar's Presenting switch is on
    assert "presenting=true" in found["_url"]  # the page's link keeps it
    assert opening["font"] > 16 and opening["scrolled"] == 0  # drawn in Presenting's larger type
    # the opening chart whole, its notes and legend too
    assert opening["bottom"] <= PROJECTOR["height"], f"the opening chart ends at {opening['bottom']:.0f} px"


_measured: dict[str, dict] = {}  # each page's tabs, measured once: a page is opened and its tabs clicked in turn


def measured(browser, app_url, query: str) -> dict:
    """Each tab of `query`'s page in Presenting: its chart (None for a tab without one), whether the page showed an
    exception, by the tab's label (EVERY_ENGINE for the page without tabs)."""
    if query not in _measured:
        context, page = opened(browser, app_url, query)
        try:
            found = {"_shown": drawn(page), "_exception": page.locator("[data-testid=stException]").count() > 0,
                     "_switched": page.get_by_role("switch", name="Presenting: larger text in the charts").is_checked(),
                     "_url": page.url}
            tabs = [t.strip() for t in page.get_by_role("tab").all_inner_texts()]
            shown = page.locator("[role=tab][aria-selected=true]").inner_text().strip() if tabs else EVERY_ENGINE
            found[shown] = found["_shown"]
            for tab in [t for t in tabs if t != shown]:
                page.get_by_role("tab", name=tab, exact=True).click()
                found[tab] = drawn(page)
                found["_exception"] |= page.locator("[data-testid=stException]").count() > 0
            _measured[query] = found
        finally:
            context.close()
    return _measured[query]


@pytest.mark.parametrize("query, tab", PLOT_CASES)
def test_presenting_at_1024_every_tabs_plot_is_on_the_first_screen(browser, app_url, query, tab):
    found = measured(browser, app_url, query)
    assert not found["_exception"], "the page showed an exception"
    assert tab in found, f"the page has no tab {tab!r}: it has {sorted(k for k in found if not k.startswith('_'))}"
    chart = found[tab]
    assert chart is not None, f"{tab} drew no chart"
    assert chart["font"] > 16 and chart["scrolled"] == 0  # in Presenting's larger type, the page at its top
    # its lesson, the plot (One step: every rank's lane), on the first screen; what is under the plot may follow
    assert chart["plotBottom"] <= PROJECTOR["height"], f"{tab}: the plot ends at {chart['plotBottom']:.0f} px"


LEGEND_ROW_PX = 30  # a legend's title or first entry, at Presenting's type


@pytest.mark.parametrize("query, tab", CASES)
def test_presenting_at_1024_every_tabs_legend_starts_on_the_first_screen(browser, app_url, query, tab):
    # A chart that fits but names its colours under the fold does not teach: a legend moved off the plot's top goes
    # beside it where it can, and at least its first row is read on the first screen.
    chart = measured(browser, app_url, query)[tab]
    assert chart is not None, f"{tab} drew no chart"
    if chart["legendTop"] is not None:
        assert chart["legendTop"] + LEGEND_ROW_PX <= PROJECTOR["height"], f"{tab}: the legend starts at {chart['legendTop']:.0f} px"
    # and every colour it names is in sight: a legend that scrolls hides its last entries behind a 4 px bar
    assert not chart["legendScrolls"], f"{tab}: the legend scrolls"

"""Every engine's page and every preset, read back from the rendered pixels at 1400, 1024 (Presenting off and
on) and 800 pixels wide, on the light and the dark theme: nothing overlaps, nothing is cut mid-word or split
from its unit, text reads 4.5:1 and lines 3:1 on what they cross, and the first screen is not mostly blank
(tests/browser/layout_checks.py says how each is read).

    .venv/bin/python -m pytest tests/browser/test_browser_layout.py -q

A page is opened once, on the light theme, and then resized: the charts follow the width as plotly does on a real
window, and Presenting reruns the page at the larger type. Then the system's scheme turns dark, which Streamlit
follows at once; its charts keep the theme they were drawn in, so Presenting is turned off, a rerun that draws
every chart again, now dark (pixel for pixel what a page opened dark draws), and the screens are read again. One
run serves every screen, and the 1024 × 768 one is also asked what test_browser_first_screen.py asks of a first
screen.
"""
from __future__ import annotations

import pytest

from dpviz.engines import ENGINES
from dpviz.presets import ALL_PRESETS, COMPARE_PRESETS
from layout_checks import first_screen_problems
from test_browser_first_screen import assert_the_first_screen_shows_the_chart
import waits
from test_browser import SVG
from test_browser_classroom import fresh
from test_browser_projector import present

pytestmark = pytest.mark.browser

PAGES = ([f"?engine={name}" for name in (*ENGINES, "both", "memory")]
         + [f"?preset={name}" for name in [*ALL_PRESETS, *COMPARE_PRESETS]])
# (width, height, presenting): a wide screen, a projector's 1024 × 768 with and without Presenting, a narrow window.
SCREENS = [(1400, 900, False), (1024, 768, False), (800, 768, False), (1024, 768, True)]
RUN_TIMEOUT_MS = 240_000  # a page of every engine starts four engines' processes: minutes on a busy machine
# Pages whose first screens do not read right yet, and why: marked xfail (not strict), each to leave this list.
NOT_YET: dict[str, str] = {}


def darkened(page) -> None:
    """The system's scheme turned dark under an open page, and every chart drawn again in it: Streamlit follows the
    scheme at once, but a chart keeps the theme it was drawn in until the script sends it again, which turning
    Presenting (on at this point) off does for every chart."""
    page.emulate_media(color_scheme="dark")
    present(page)


def opened(browser, app_url, query: str, width: int, height: int):
    """A fresh session on the light theme at `width` × `height`, `query` opened and its first chart drawn: the
    context (to close) and the page."""
    context, page = fresh(browser, app_url, {"width": width, "height": height}, scheme="light")
    try:
        page.set_default_timeout(RUN_TIMEOUT_MS)
        waits.opened(page, f"/{query}")
        page.wait_for_selector(SVG)
    except BaseException:
        context.close()
        raise
    return context, page


@pytest.mark.parametrize("query", [pytest.param(q, marks=[pytest.mark.xfail(reason=NOT_YET[q], strict=False)]
                                                if q in NOT_YET else []) for q in PAGES])
def test_every_first_screen_reads_at_every_width_and_theme(browser, app_url, artifacts, query):
    problems = []
    context, page = opened(browser, app_url, query, SCREENS[0][0], SCREENS[0][1])
    try:
        for scheme in ("light", "dark"):
            if scheme == "dark":
                darkened(page)
            for width, height, presenting in SCREENS:
                waits.resized(page, width, height)
                if presenting:
                    present(page)
                if (scheme, width, height, presenting) == ("light", 1024, 768, False):
                    assert_the_first_screen_shows_the_chart(page, query.lstrip("?"))
                found = first_screen_problems(page)
                if found:
                    name = f"layout-{query.strip('?').replace('=', '-')}-{width}-{scheme}{'-presenting' if presenting else ''}"
                    page.screenshot(path=artifacts / f"{name}.png")
                problems += [f"{width}{' presenting' if presenting else ''} {scheme}: {p}" for p in found]
    finally:
        context.close()
    assert not problems, "\n".join(problems[:40])


# Every tab of every engine's page (training, 4 devices: every view has something to draw), at the two screens
# where room is shortest: a narrow window on the light theme, and a projector's Presenting on the dark.
TAB_PAGES = [f"?engine={name}&gpus=4&train=true" for name in ENGINES]
TAB_SCREENS = [("light", 800, 768, False), ("dark", 1024, 768, True)]
TABS_NOT_YET: dict[str, str] = {}


@pytest.mark.parametrize("query", [pytest.param(q, marks=[pytest.mark.xfail(reason=TABS_NOT_YET[q], strict=False)]
                                                if q in TABS_NOT_YET else []) for q in TAB_PAGES])
def test_every_tab_of_every_engines_page_reads_narrow_and_presented(browser, app_url, artifacts, query):
    problems = []
    context, page = opened(browser, app_url, query, TAB_SCREENS[0][1], TAB_SCREENS[0][2])
    try:
        for scheme, width, height, presenting in TAB_SCREENS:
            waits.resized(page, width, height)
            if scheme == "dark":  # the one run again, every chart drawn dark (see darkened), then Presenting on
                page.emulate_media(color_scheme="dark")
            if presenting:
                present(page)
            for tab in [t.strip() for t in page.get_by_role("tab").all_inner_texts()]:
                if tab == "Tutorial log":  # text, not a chart
                    continue
                waits.tab_shown(page, tab)
                found = first_screen_problems(page)
                if found:
                    page.screenshot(path=artifacts / f"layout-tab-{query.strip('?').split('&')[0].replace('=', '-')}-{tab}-{width}-{scheme}.png")
                problems += [f"{tab} {width}{' presenting' if presenting else ''} {scheme}: {p}" for p in found]
    finally:
        context.close()
    assert not problems, "\n".join(problems[:40])

"""How much of a projector's first screen (1024 × 768) is left for a chart: the page counts what it puts above
the shown chart as it draws it (its heading, the warnings above the tabs, a view's slider), and Presenting lays
the chart out for what is left (dpviz.figures.presenting), so the plot ends on the first screen.

Heights measured in Chromium at 1024 × 768 with the page's own style (dpviz.page.main.COMPACT)."""
from __future__ import annotations

import math

import streamlit as st

from dpviz.figures.text_fit import text_px

SCREEN_PX = 768  # a projector's first screen
PAGE_TOP_PX = 100  # the page's one-line heading and the tabs, down to a tab's first element
HEADING_LINE_PX = 30  # each more line of a heading that wraps
HEADING_SIZE, HEADING_ROOM_PX = 25.6, 590  # its type (1.6rem, semibold) and the width it wraps in, less its help icon
NOTICE_PX, NOTICE_LINE_PX = 35, 25.6  # a warning box's padding and gap under it, and each line of its text
NOTICE_SIZE, NOTICE_ROOM_PX = 16, 630  # its type and the width its text wraps in
CONTROL_PX = 84  # a slider or a row of radio buttons with its label, above a view's chart
BARE_CONTROL_PX = 56  # a row of radio buttons without its label's line
TOGGLE_PX = 40  # a switch above a view's chart
PAIR_HEADING_PX = 46  # a run's name over its chart when two engines' charts are shown one above the other
SLACK_PX = 12  # what the counts above miss (a box's wrap a word early, the browser's rounding): a plot laid out to
# end exactly at the fold ran a few pixels past it
ABOVE = "above_chart"  # the pixels the page has put above the chart this run, besides PAGE_TOP_PX


def start(heading: str) -> None:
    """A new run of the script: only the heading so far, and its lines past the first."""
    lines = math.ceil(text_px(heading, HEADING_SIZE) * 1.08 / HEADING_ROOM_PX)  # semibold: a little wider
    st.session_state[ABOVE] = max(lines - 1, 0) * HEADING_LINE_PX


def add(px: float) -> None:
    st.session_state[ABOVE] = st.session_state.get(ABOVE, 0) + px


def notice(sentence: str) -> None:
    """A warning or note box of `sentence` above the tabs."""
    lines = max(1, math.ceil(text_px(sentence, NOTICE_SIZE) / NOTICE_ROOM_PX))
    add(NOTICE_PX + lines * NOTICE_LINE_PX)


def left_px() -> int:
    """The first screen's height left for the chart about to be drawn, from its top."""
    return round(SCREEN_PX - PAGE_TOP_PX - SLACK_PX - st.session_state.get(ABOVE, 0))

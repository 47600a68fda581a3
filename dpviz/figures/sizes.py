"""The house's sizes every view measures against: type readable on a projector, the narrowest chart
the page draws, and the margins and gaps of the house layout (dpviz.figures.layout).

A view that places its own marks (a legend under its plot, rows named on an axis) reads these, so that
what it adds lines up with what styled() sets.
"""
from __future__ import annotations

FONT_SIZE = 16  # readable from the back of a classroom
TITLE_SIZE, SUBTITLE_SIZE, LEGEND_SIZE = FONT_SIZE + 4, FONT_SIZE - 2, FONT_SIZE - 2
# Set on the axes themselves: Streamlit's theme gives ticks and axis titles its own smaller sizes otherwise.
TICK_SIZE, AXIS_TITLE_SIZE = FONT_SIZE - 2, FONT_SIZE - 1
FONT_FAMILY = "Inter, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

# The page's chart is 468 px wide in an 800 px window (measured: the sidebar takes the rest): text is
# wrapped and legends laid out for it (dpviz.figures.text_fit, dpviz.figures.legends).
NARROWEST_PX = 468
# Presenting is for a projector: its 1024 × 768 window gives the chart 676 px beside the sidebar (measured), and
# presentation() wraps and lays out its larger type for that width, not for the narrowest chart's.
PROJECTOR_PX = 676
# Its first screen, 768 px high, under the page's heading, the tabs and a view's slider (measured: 184 px).
PROJECTOR_ROOM_PX = 768 - 184
TOP_PAD_PX = 18  # above the title: plotly sets a top-anchored title's first line a little high
LINE_EM = 1.3  # a line of the title block, in ems of its own font
GAP_PX = 14  # between the title block and what is under it (the legend, or the plot)
LEGEND_ROW_PX = 26  # a row of a horizontal legend at LEGEND_SIZE
MARGIN = dict(l=80, r=30, b=60)
BASE_TOP_PX = 100  # the top margin a one-line title and a one-line subtitle had, with no legend above the plot

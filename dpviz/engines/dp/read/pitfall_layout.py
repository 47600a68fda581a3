"""Layout shared by the pitfall figures: a heading over each stacked panel, and a title pinned to the top.

A heading sits above its panel, on the page's background, so it sets no colour of its own. Plotly
centres a title in the top margin; a figure whose margin also holds its first panel's heading pins
the title to the top instead, so the two never overlap.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from dpviz.figures.text_fit import line_count

HEADING_SIZE = 14
HEADING_LINE_EM = 1.3  # a heading's line, in ems of its font
HEADING_SHIFT_PX = 4  # between a heading and its panel


def heading_px(headings: list[str]) -> int:
    """The pixels the tallest of `headings` takes over its panel: its lines, and the gap under them."""
    lines = max((line_count(heading) for heading in headings), default=0)
    return math.ceil(lines * HEADING_SIZE * HEADING_LINE_EM) + HEADING_SHIFT_PX


def panel_headings(fig: go.Figure, headings: list[str]) -> None:
    """Write headings[i] just above the i-th panel (subplot rows from the top, one column)."""
    for row, heading in enumerate(headings, start=1):
        axis = "" if row == 1 else row
        fig.add_annotation(text=heading, x=0, y=1, xref=f"x{axis} domain", yref=f"y{axis} domain", xanchor="left",
                           yanchor="bottom", yshift=HEADING_SHIFT_PX, showarrow=False, align="left",
                           font=dict(size=HEADING_SIZE))


def title_on_top(fig: go.Figure, margin_top: int) -> None:
    """Give the figure a top margin of at least `margin_top` px (more if styled() wrapped the title and
    grew it), with the title and its subtitle at the very top."""
    top = max(fig.layout.margin.t or 0, margin_top)
    fig.update_layout(margin=dict(t=top), title=dict(yref="container", y=1, yanchor="top", pad=dict(t=16)))


def title_over_headings(fig: go.Figure, headings: list[str]) -> None:
    """After styled(), which kept the title's and the subtitle's room: the top margin grown by the first panel's
    heading, and the title at the very top."""
    title_on_top(fig, (fig.layout.margin.t or 0) + heading_px(headings[:1]))

"""The house look every view puts on its figure: type sizes, the title block and margins, never a template, a
background or an ink colour of its own.

On the page, st.plotly_chart's theme="streamlit" draws the background, the text and the grid in the page's
light or dark theme, and colours set here would fight it (dark text on the dark theme). Text off the marks
asks for the theme's own body text (`colors.THEME_TEXT`), which Streamlit swaps in, rather than its faded
grey (3.7:1 on white). What is drawn on a mark sets its own colour (`colors.text_color_on`). The offline
report has no theme to follow, so it puts the light look on (`light`).

    fig = styled(fig, title, notes)          # after drawing: wraps the title, keeps room for the legend
    go.Figure(data, house_layout(title, notes))  # a figure made whole at once, its layout as a dict
"""
from __future__ import annotations

import math
import re
from typing import Any

import plotly.graph_objects as go

from dpviz.figures.colors import GUIDE, TEXT, THEME_BACKGROUND, THEME_TEXT, WHITE
from dpviz.figures.legends import TOP_LEGEND, legend_entries, legend_placed, legend_px
from dpviz.figures.sizes import (AXIS_TITLE_SIZE, BASE_TOP_PX, FONT_FAMILY, FONT_SIZE, GAP_PX, LEGEND_SIZE, LINE_EM,
                                 MARGIN, NARROWEST_PX, SUBTITLE_SIZE, TICK_SIZE, TITLE_SIZE, TOP_PAD_PX)
from dpviz.figures.text_fit import SEPARATOR, line_count, unwrap, wrap


def title_block_px(fig: go.Figure) -> int:
    """Pixels from the figure's top to the end of its title and subtitle (both as wrapped)."""
    title = fig.layout.title
    size = (title.font.size or TITLE_SIZE)
    sub_size = (title.subtitle.font.size or SUBTITLE_SIZE)
    lines = line_count(title.text or "")
    sub_lines = line_count(title.subtitle.text or "")
    return (title.pad.t or TOP_PAD_PX) + math.ceil(lines * size * LINE_EM + sub_lines * sub_size * LINE_EM)


def subplot_titles(fig: go.Figure) -> list:
    """The annotations make_subplots puts over each subplot: centred, just above its domain."""
    return [a for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper" and a.showarrow is False
            and a.xanchor == "center" and a.yanchor == "bottom" and a.text]


def wrap_subplot_titles(fig: go.Figure, margins_px: float = MARGIN["l"] + MARGIN["r"],
                        width_px: float = NARROWEST_PX) -> None:
    """Subplot titles cut to the width of their subplot on a chart `width_px` wide (the narrowest chart's)."""
    plot_px = width_px - margins_px
    for annotation in subplot_titles(fig):
        # The narrowest axis under the title is its own subplot's: a panel spanning both columns lies under a
        # left panel's title too (and plotly's layout keys come in no fixed order).
        under = [fig.layout[k] for k in fig.layout if re.match(r"xaxis\d*$", k)
                 and fig.layout[k].domain and fig.layout[k].domain[0] <= annotation.x <= fig.layout[k].domain[1]]
        axis = min(under, key=lambda a: a.domain[1] - a.domain[0], default=None)
        share = (axis.domain[1] - axis.domain[0]) if axis is not None else 1.0
        annotation.text = wrap(unwrap(annotation.text), annotation.font.size or FONT_SIZE, plot_px * share + 10)


def over_plot_px(fig: go.Figure) -> int:
    """Room the top subplot's title takes above the plot area (0 without subplot titles)."""
    tops = [a for a in subplot_titles(fig) if a.y >= 0.99]
    return max((math.ceil(line_count(a.text) * (a.font.size or FONT_SIZE) * LINE_EM) + 4 for a in tops), default=0)


def styled(fig: go.Figure, title: str, notes: list[str], height: int = 520) -> go.Figure:
    """Apply the house look; `notes` become the subtitle (the simulated note, what was aggregated).

    The title and the subtitle are wrapped to fit the narrowest chart, and the top margin (and the
    height, so the plot keeps its size) grows by the lines that adds. A legend the view has not placed
    goes in one or more rows between the subtitle and the plot, with room kept for its rows at the
    narrowest width, so it meets neither the title nor what is above the chart. One update_layout:
    plotly's updates cost milliseconds each (a view that makes its figure whole at once takes
    house_layout instead)."""
    if fig.layout.annotations:
        wrap_subplot_titles(fig)
    over = over_plot_px(fig) if fig.layout.annotations else 0
    on_top = bool(legend_entries(fig)) and not legend_placed(fig)
    legend_room = legend_px(fig, size=LEGEND_SIZE, margins=(MARGIN["l"], MARGIN["r"])) if on_top else 0
    fig.update_layout(house_layout(title, notes, height, legend_on_top=on_top, legend_room=legend_room, over=over,
                                   axes=[k for k in fig.layout if re.match(r"[xy]axis\d+$", k)]))
    return fig


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over` laid on it, nested dicts merged key by key, as update_layout merges them."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def house_layout(title: str, notes: list[str], height: int = 520, *, least_top: bool = True,
                 legend_on_top: bool = False, legend_room: int = 0, over: int = 0,
                 axes: list[str] = ()) -> dict[str, Any]:
    """styled()'s layout as a plain dict, for a view that makes its figure whole at once (a figure made
    with its layout costs less than one updated afterwards): `legend_on_top` for a legend to place above
    the plot, `legend_room` its rows' pixels, `over` what subplot titles take above the plot, `axes` the
    axes beyond the first two; with `least_top` off, the top margin is exactly the title's room, however
    short."""
    text = wrap(title, TITLE_SIZE)
    subtitle = wrap(SEPARATOR.join(n for n in notes if n), SUBTITLE_SIZE)
    ink = dict(size=LEGEND_SIZE, color=THEME_TEXT)
    legend = dict(TOP_LEGEND, font=ink) if legend_on_top else dict(font=ink)
    block = TOP_PAD_PX + math.ceil(line_count(text) * TITLE_SIZE * LINE_EM + line_count(subtitle) * SUBTITLE_SIZE * LINE_EM)
    top = block + GAP_PX + over + legend_room
    top = max(top, BASE_TOP_PX) if least_top else top
    total = height + top - BASE_TOP_PX
    if legend_on_top and over:  # over the top subplot's title, not on it
        legend["y"] = 1 + over / max(total - top - MARGIN["b"], 1)
    # Text off the marks in the theme's own ink (THEME_TEXT), not its faded grey: 4.5:1 on either page.
    axis = dict(tickfont=dict(size=TICK_SIZE, color=THEME_TEXT), title=dict(font=dict(size=AXIS_TITLE_SIZE, color=THEME_TEXT)))
    return dict(
        font=dict(family=FONT_FAMILY, size=FONT_SIZE, color=THEME_TEXT),
        title=dict(
            text=text, x=0.01, xanchor="left", xref="container", y=1, yanchor="top",
            yref="container", pad=dict(t=TOP_PAD_PX), font=dict(size=TITLE_SIZE, color=THEME_TEXT),
            subtitle=dict(text=subtitle, font=dict(size=SUBTITLE_SIZE, color=THEME_TEXT)),
        ),
        hoverlabel=dict(font=dict(size=FONT_SIZE - 1)), legend=legend, height=total, margin=dict(MARGIN, t=top),
        **{name: axis for name in ["xaxis", "yaxis", *axes]},
    )


def light(fig: go.Figure) -> go.Figure:
    """The light look on `fig` itself, for where no page theme applies (the offline HTML report): white
    background, dark ink, grey guides; what styled() leaves to the page's theme."""
    axis = dict(gridcolor="#E5E5E5", zerolinecolor="#D0D0D0", linecolor=GUIDE)
    fig.update_layout(template="none", paper_bgcolor=WHITE, plot_bgcolor=WHITE, font_color=TEXT,
                      hoverlabel=dict(bgcolor=WHITE, font_color=TEXT))
    fig.update_xaxes(**axis)
    fig.update_yaxes(**axis)
    # The theme's ink (THEME_TEXT) has no Streamlit to swap it in: the light look's dark text instead.
    layout = fig.layout
    legends = [layout[k] for k in layout if re.match(r"legend\d*$", k)]  # a second legend's too
    for font in (layout.title.font, layout.title.subtitle.font, *(g.font for g in legends), layout.legend.title.font,
                 *(a.font for a in layout.annotations)):
        if font.color == THEME_TEXT:
            font.color = TEXT
    for axis_name in [k for k in layout if re.match(r"[xy]axis\d*$", k)]:
        for font in (layout[axis_name].tickfont, layout[axis_name].title.font):
            if font.color == THEME_TEXT:
                font.color = TEXT
    for note in layout.annotations:  # a halo in the page's background: the report's is white
        if note.arrowcolor == THEME_BACKGROUND:
            note.arrowcolor = WHITE
        if note.bgcolor == THEME_BACKGROUND:  # a plate in the page's background (a cut axis's //)
            note.bgcolor = WHITE
    return fig

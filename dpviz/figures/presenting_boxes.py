"""Words in boxes sized to hold them (One step's: an annotation named CELL_NOTE per box, the boxes as tall as the
fullest one's lines need, each a rectangle around its note) on a projector whose first screen cannot hold the boxes whole: presentation() lets the
plot give up some of its height and each box keeps the lines its smaller box holds, its last one MORE, the words it
no longer shows in a hover over it. The type keeps its size: Presenting never makes text smaller.

    cut_box_notes(fig, plot_px=330)   # each box keeps the lines its rectangle holds on a plot 330 px high
"""
from __future__ import annotations

import re

import plotly.graph_objects as go

from dpviz.figures.sizes import LINE_EM

CELL_NOTE = "cell"  # the name of an annotation of words in a box sized to hold them: it keeps its size
MORE = "[…]"  # the last line a box has room for, where it had more (the hover gives them all): bracketed, never
# read as a word cut mid-way ("s…") where the lines before it end
LEAST_LINES = 2  # a box keeps at least its first line and MORE
PAD_PX = 4  # a box's room above and below its lines, the least


def _box_px(fig: go.Figure, note, plot_px: float) -> float | None:
    """The height in pixels, on a plot `plot_px` high, of the rectangle drawn around `note` (None: none is)."""
    axis = fig.layout.yaxis
    if axis.range is None:
        return None
    span = abs(float(axis.range[1]) - float(axis.range[0])) or 1.0
    for shape in fig.layout.shapes:
        if (shape.type == "rect" and shape.xref in (None, "x") and shape.yref in (None, "y")
                and min(shape.x0, shape.x1) <= note.x <= max(shape.x0, shape.x1)
                and min(shape.y0, shape.y1) <= note.y <= max(shape.y0, shape.y1)):
            return abs(shape.y1 - shape.y0) / span * plot_px
    return None


def lines_held(fig: go.Figure, note, plot_px: float) -> int:
    """The lines of `note` its box holds on a plot `plot_px` high, at least LEAST_LINES."""
    box = _box_px(fig, note, plot_px)
    if box is None:
        return LEAST_LINES
    return max(LEAST_LINES, int((box - PAD_PX) // ((note.font.size or 12) * LINE_EM)))


def cut_box_notes(fig: go.Figure, plot_px: float) -> None:
    """Each CELL_NOTE of `fig` cut to the lines its box holds on a plot `plot_px` high (the boxes drawn in data
    coordinates of its y axis), the words it drops in a hover over it (a note its figure cut already, ending in
    MORE, has its hover)."""
    xs, ys, words = [], [], []
    for note in [a for a in fig.layout.annotations if a.name == CELL_NOTE and a.text]:
        lines, keep = note.text.split("<br>"), lines_held(fig, note, plot_px)
        if len(lines) <= keep:
            continue
        if lines[-1] != MORE:
            xs.append(note.x)
            ys.append(note.y)
            words.append("<br>".join(re.sub(r"<[^>]+>", "", line) for line in lines))
        note.text = "<br>".join(lines[:keep - 1] + [MORE])
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", marker=dict(size=18, opacity=0), hovertext=words,
                                 hovertemplate="%{hovertext}<extra></extra>", showlegend=False))

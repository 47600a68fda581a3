"""What presentation() moves from above a plot to under it when the plot would otherwise run past a projector's first
screen: the subtitle's notes, then a legend laid out above the plot. The plot (the lesson) then starts under the title
alone; what was moved is still on the chart, read after the plot.

    bottom = subtitle_under(fig, bottom, plot_width, left)   # the notes under what is under the plot now
    gap, bottom = legend_under(fig, bottom, width)          # the legend too: set its y once the plot's height is known
"""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.figures.colors import THEME_TEXT
from dpviz.figures.legends import legend_px
from dpviz.figures.sizes import LINE_EM, SUBTITLE_SIZE
from dpviz.figures.text_fit import line_count, unwrap, wrap

UNDER_GAP_PX = 10  # between what was under the plot and what is moved there
NOTES = "notes"  # the name of the annotation the subtitle's notes become


def subtitle_under(fig: go.Figure, bottom_px: float, width_px: float, left_px: float) -> float:
    """The subtitle as a note under everything that is under the plot (`bottom_px` of it), at the title's left and
    wrapped to the chart's width `width_px`; returns the bottom margin that holds it. No subtitle: `bottom_px`."""
    subtitle = fig.layout.title.subtitle
    if not subtitle.text:
        return bottom_px
    size = subtitle.font.size or SUBTITLE_SIZE
    text = wrap(unwrap(subtitle.text), size, width_px - 2 * 8)
    fig.add_annotation(text=text, name=NOTES, xref="paper", x=0, xanchor="left", xshift=-left_px + 8,
                       yref="paper", y=0, yanchor="top", yshift=-round(bottom_px + UNDER_GAP_PX), showarrow=False,
                       align="left", font=dict(size=size, color=subtitle.font.color or THEME_TEXT))
    subtitle.text = None
    return bottom_px + UNDER_GAP_PX + line_count(text) * size * LINE_EM + 8


def legend_under(fig: go.Figure, bottom_px: float, width_px: float) -> tuple[float, float]:
    """The legend laid out above the plot moved under everything under the plot (`bottom_px` of it), from the
    plot's left; returns its gap from the plot's bottom edge in pixels (its y is that over the plot's final height)
    and the bottom margin that holds it."""
    legend = fig.layout.legend
    gap = bottom_px + UNDER_GAP_PX
    legend.update(orientation="h", x=0, xanchor="left", xref="paper", yanchor="top", yref="paper", y=-0.1)
    return gap, gap + legend_px(fig, width_px)


def controls_over_plot(fig: go.Figure, plot_px: float) -> dict[tuple[str, int], float]:
    """An animation's controls (placed on the paper: plotly has no other place for them) laid out over the plot (Step through's play/pause row and slider, under the title):
    each one's (kind, index) and how far over the plot's top edge its top sits, in pixels of a plot `plot_px` high.
    Empty when none sits there."""
    over = {}
    for kind in ("updatemenus", "sliders"):
        for k, control in enumerate(fig.layout[kind] or ()):
            if control.y is not None and control.y > 1 and control.yanchor == "top":
                over[kind, k] = (control.y - 1) * plot_px
    return over


def controls_under(fig: go.Figure, over: dict[tuple[str, int], float], bottom_px: float,
                   scale: float) -> tuple[dict[tuple[str, int], float], float]:
    """The controls `over` the plot (controls_over_plot) moved under everything under it (`bottom_px` of it), in the
    same order and spacing, `scale` times: a projector's first screen holds the lesson, the plot, whole, and the
    controls follow it. Returns each control's gap from the plot's bottom edge in pixels (its y is that over the
    plot's final height) and the bottom margin that holds them."""
    band = max(over.values())  # from the highest control's top to the plot: the rows and the gaps between them
    gaps = {key: bottom_px + UNDER_GAP_PX + (band - px) * scale for key, px in over.items()}
    return gaps, bottom_px + UNDER_GAP_PX + band * scale

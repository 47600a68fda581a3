"""What presentation() moves from above a plot to under it when the plot would otherwise run past a projector's first
screen: the subtitle's notes, then a legend laid out above the plot. The plot (the lesson) then starts under the title
alone; what was moved is still on the chart, read after the plot.

    bottom = subtitle_under(fig, bottom, plot_width, left)   # the notes under what is under the plot now
    right, hang = legend_beside(fig, left, right, width, plot_px)  # or beside the plot: on the screen
    gap, bottom = legend_under(fig, bottom, width)          # else under it: set its y once the plot's height is known
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from dpviz.figures.colors import THEME_TEXT
from dpviz.figures.legends import BOX_PX, ENTRY_GAP_PX, group_gaps_px, legend_entries, legend_px
from dpviz.figures.sizes import LEGEND_SIZE, LINE_EM, SUBTITLE_SIZE
from dpviz.figures.text_fit import line_count, text_px, unwrap, wrap

UNDER_GAP_PX = 10  # between what was under the plot and what is moved there
BESIDE_TEXT_SHARE = 0.14  # the widest line of an entry beside the plot, of the chart's width: longer ones wrap
# ... or, where entries so wrapped stand taller than the plot (the pipeline's eleven kinds in its Timeline), this share:
# an entry a line ('receive activations'), the legend as short as its entries, its last ones on the first screen
BESIDE_WIDE_SHARE = 0.26
BESIDE_PLOT_SHARE = 0.33  # the least of the chart's width the plot keeps beside a legend
SIZED_SLACK = 0.03  # words sized to their cells on the narrowest chart keep a little room around them: 3% of it
ROW_EM = 1.3  # a vertical legend's row, in ems of its type, and plotly's 6 px between rows
NOTES = "notes"  # the name of the annotation the subtitle's notes become
HANG_SLACK_PX = 12  # a hanging legend's most height over its measured rows: plotly's padding, and no scrollbar


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


def _lines(text: str, size: float, room_px: float) -> str:
    """`text` broken between words into lines no wider than `room_px` where its words allow, joined by <br>."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_px(f"{lines[-1]} {word}", size) <= room_px:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return "<br>".join(lines)


def _beside(fig: go.Figure, names: list[str], size: float, room_px: float) -> tuple[float, float, dict[str, str], str]:
    """A legend beside the plot whose entries break into lines no wider than `room_px`: its width and height in pixels,
    each entry's lines and its title's."""
    legend = fig.layout.legend
    room = min(max((text_px(n, size) for n in names), default=0), room_px)
    lines = {n: _lines(n, size, room) for n in names}
    wide = ENTRY_GAP_PX + max((text_px(line, size) for n in names for line in lines[n].split("<br>")), default=0)
    title, title_size = unwrap(legend.title.text or ""), legend.title.font.size or size
    wide = max(wide, max((text_px(word, title_size) for word in title.split()), default=0)) + BOX_PX
    title = wrap(title, title_size, wide - BOX_PX) if title else title
    rows = sum(line_count(lines[n]) for n in names)
    tall = (rows * ROW_EM * size + len(names) * 6 + group_gaps_px(fig) + line_count(title) * ROW_EM * title_size
            + BOX_PX)
    return wide, tall, lines, title


def legend_beside(fig: go.Figure, left_px: float, right_px: float, width_px: float, plot_px: float,
                  least_px: float = 0.0) -> tuple[float, float] | None:
    """The legend laid out above the plot moved to the plot's right, its entries one under another from the plot's
    bottom (a legend under a plot that fills the first screen is off it: the colours it names would go unread), or
    from its top where it stands taller than the plot (`plot_px`: the pipeline's eleven kinds in its Timeline), an
    entry wider than BESIDE_TEXT_SHARE of the chart on two lines or more, its title wrapped to its width; returns the
    right margin that holds it and how far it hangs under the plot's bottom. None, and nothing moved, where the
    plot would keep less than BESIDE_PLOT_SHARE of a chart `width_px` wide (margins `left_px`, `right_px`) or less
    than `least_px` (the width its cells' words were sized for)."""
    legend = fig.layout.legend
    names = legend_entries(fig)
    size = legend.font.size or LEGEND_SIZE
    least = max(BESIDE_PLOT_SHARE * width_px, least_px * (1 - SIZED_SLACK))
    laid = _beside(fig, names, size, BESIDE_TEXT_SHARE * width_px)
    if laid[1] > plot_px:  # taller than the plot, it would hang past the first screen: an entry a line where it fits
        wider = _beside(fig, names, size, BESIDE_WIDE_SHARE * width_px)
        if width_px - left_px - right_px - UNDER_GAP_PX - wider[0] >= least:
            laid = wider
    wide, tall, lines, title = laid
    right = right_px + UNDER_GAP_PX + wide
    if width_px - left_px - right < least:
        return None
    for trace in fig.data:
        if trace.name in lines and (trace.legend or "legend") == "legend":
            trace.name = lines[trace.name]
    hang = max(tall - plot_px, 0.0)
    # plotly scrolls a legend beside the plot past the plot's height: one that hangs under it is given its own
    legend.update(orientation="v", x=1, xanchor="left", xref="paper", y=1 if hang else 0,
                  yanchor="top" if hang else "bottom", yref="paper", title=dict(text=title or None, side="top"),
                  maxheight=math.ceil(tall + HANG_SLACK_PX) if hang else None)
    return right, hang

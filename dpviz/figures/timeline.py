"""Timeline: DataParallel's steps in order above, the same batches as measured below, one lane per device.

    timeline_figure(trace)                      # both panels over the first window of batches
    timeline_figure(trace, 150, 8)              # batches 150-157
    timeline_figure(trace, show="measured")     # one panel only ("steps" or "measured")

The steps panel (timeline_steps) draws each batch's scatter, replicate, forwards side by side, gather
(and in training loss, backwards side by side, sum of gradients, step) in equal slots: what happens in
which order, with no CPU noise. The measured panel (timeline_measured) draws when each ran: each batch a
labelled band, long quiet stretches cut short so one slow moment does not set the scale, or, past
DETAIL_BATCHES batches, one typical batch with percentile whiskers instead of a wall of slivers. Notes
under the panels say what the times mean (simulated threads take turns; real GPUs overlap) and what was
done to draw them. A legend entry per phase, shared by both panels (timeline_look).

Past MAX_MARKS the figure shows a window of consecutive batches and says so in its subtitle.
DistributedDataParallel traces have a layout of their own (timeline_ddp).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.trace.vocabulary import Vocabulary
from dpviz.figures.colors import THEME_TEXT
from dpviz.figures.arguments import check_batch
from dpviz.figures.chart_details import chart_details
from dpviz.figures.layout import title_block_px
from dpviz.figures.legends import legend_px
from dpviz.figures.sizes import AXIS_TITLE_SIZE, TICK_SIZE
from dpviz.figures.text_fit import text_px
from dpviz.figures.timeline_look import LEGEND_TITLE, lane_label
from dpviz.figures.timeline_measured import MIN_SHARE, add_measured, add_typical, drawn_host, prepare_timeline  # noqa: F401

PANELS = ("both", "steps", "measured")
# The narrowest the chart is drawn: 452 px measured in an 800 px window (NARROWEST_PX, 468, the most it may
# be); 440 keeps the legend's rows and the slot names as planned wherever the page's width falls between.
# Presenting (at 1024 px) the chart is about 620 px wide, its type and margins PRESENTING times larger.
NARROW_CHART_PX, PRESENTING_CHART_PX, PRESENTING = 440, 620, 1.35
# Entries of a fixed width, as many to a row as the chart holds: room is kept for the rows they take on
# the narrowest chart (legends.legend_px: two entries of a swatch and "sum of gradients" beside the lane names).
LEGEND_ENTRY_PX = 115
# Vertical layout in pixels, top to bottom: the title block, the legend's title and rows, then each
# panel (its title and batch labels, its lanes, its axis labels), then the notes.
LEGEND_GAP_PX = 10
HEADER_PX = 46  # a panel's title, then its batch labels
STEP_LANE_PX, LANE_PX, DENSE = 22, 32, 8  # per lane; past DENSE lanes a little less
STEP_AXIS_PX, TIME_AXIS_PX = 84, 64  # slot names (at least; the longest sets it); time ticks and the axis title
# The slot names' tilts, in degrees below the horizontal, level first: the least that keeps neighbours apart
# is taken. A tilted name's box is its length across and its line's height (LINE_BOX_EM of its size) up.
TILTS, LINE_BOX_EM = (0, 30, 60, 90), 1.15
NOTE_LINE_PX, NOTE_GAP_PX = 19, 16
LEFT_PX, RIGHT_PX = 92, 24


def window_size(trace: Trace) -> int:
    """How many consecutive batches one timeline shows, by the trace's engine's rule."""
    return trace.spec.part("timeline_window")(trace)


@dataclass(frozen=True)
class Panel:
    """One panel's axes and its heights in pixels: header above the lanes, lanes, axis labels below."""

    name: str
    axes: tuple[str, str]
    lanes_px: int
    axis_px: int


def panels_for(show: str, devices: int) -> list[Panel]:
    step_px = (STEP_LANE_PX if devices <= DENSE else STEP_LANE_PX - 4) * devices + 8
    lane_px = (LANE_PX if devices <= DENSE else LANE_PX - 6) * devices + 8
    names = ["steps", "measured"] if show == "both" else [show]
    return [Panel(name, ("x", "y") if i == 0 else ("x2", "y2"), step_px if name == "steps" else lane_px,
                  STEP_AXIS_PX if name == "steps" else TIME_AXIS_PX) for i, name in enumerate(names)]


def _title_px(fig: go.Figure) -> int:
    """Pixels the styled title and subtitle take from the figure's top, and the gap under them."""
    return title_block_px(fig) + LEGEND_GAP_PX


def slot_tilt(labels: list[str], slots_across: float, size: float = TICK_SIZE) -> int | None:
    """The least of TILTS at which the longest slot name's box is no wider than a slot, `slots_across`
    slots filling the plot, on the narrowest chart and presenting; None when even upright names would meet."""
    looks = [((NARROW_CHART_PX - LEFT_PX - RIGHT_PX) / slots_across, size),
             ((PRESENTING_CHART_PX - (LEFT_PX + RIGHT_PX) * PRESENTING) / slots_across, size * PRESENTING)]
    longest = max((text_px(label, 1) for label in labels), default=0)  # in ems
    for tilt in TILTS:
        angle = math.radians(tilt)
        if all(em * (longest * math.cos(angle) + LINE_BOX_EM * math.sin(angle)) <= slot for slot, em in looks):
            return tilt
    return None


def step_axis_px(labels: list[str], tilt: float, size: float = TICK_SIZE) -> int:
    """Room under the steps panel for its slot names tilted `tilt` degrees: the longest one's drop, its
    line's height across the tilt, and the tick's gap, so it ends above the next heading."""
    angle = math.radians(tilt)
    longest = max((text_px(label, size) for label in labels), default=0)
    return max(STEP_AXIS_PX, math.ceil(longest * math.sin(angle) + 1.3 * size * math.cos(angle) + 12))


def name_slots(fig: go.Figure, x: str) -> int:
    """Tilt the slot names on the steps panel's axis `x` as little as keeps them apart on the narrowest
    chart, and return the room they take under it. Where even upright names would meet, every few slots
    keep theirs (each bar's hover names its step)."""
    axis = fig.layout[f"xaxis{x[1:]}"]
    labels = list(axis.ticktext or ())
    across = axis.range[1] - axis.range[0] if axis.range else max(len(labels), 1)
    tilt = slot_tilt(labels, across)
    if tilt is None:
        tilt = 90
        slot = min((NARROW_CHART_PX - LEFT_PX - RIGHT_PX) / (across * TICK_SIZE),
                   (PRESENTING_CHART_PX - (LEFT_PX + RIGHT_PX) * PRESENTING) / (across * TICK_SIZE * PRESENTING))
        every = math.ceil(LINE_BOX_EM / slot)  # slots per name, in ems of the type each look draws them in
        axis.ticktext = [label if i % every == 0 else "" for i, label in enumerate(labels)]
    axis.tickangle = -tilt
    return step_axis_px(labels, tilt)


def _lines(text: str) -> int:
    return len(re.findall(r"<br\s*/?>", text)) + 1 if text else 0


def lay_out(fig: go.Figure, panels: list[Panel], vocabulary: Vocabulary, devices: int, titles: dict[str, str],
             notes: str) -> None:
    """Heights, panel domains, lane axes, panel titles, legend and notes, from the pixel layout above."""
    # Entries in rows under the subtitle (on a wide chart they take fewer rows: the room left is
    # above the first panel); the legend's title says what an open swatch means.
    fig.update_layout(legend=dict(
        orientation="h", x=0, xanchor="left", xref="paper", yref="paper", yanchor="top", entrywidth=LEGEND_ENTRY_PX,
        entrywidthmode="pixels", traceorder="normal", groupclick="togglegroup",
        title=dict(text=LEGEND_TITLE, side="top", font=dict(color=THEME_TEXT))))  # the ink, not the theme's grey
    title_px = _title_px(fig)
    # The legend's rows as plotly lays them out on the narrowest chart, and the gap under them.
    top = title_px + legend_px(fig, NARROW_CHART_PX, margins=(LEFT_PX, RIGHT_PX)) + LEGEND_GAP_PX + HEADER_PX
    note_px = _lines(notes) * NOTE_LINE_PX + NOTE_GAP_PX if notes else 0
    bottom = panels[-1].axis_px + note_px
    plot_px = sum(p.lanes_px for p in panels) + sum(p.axis_px + HEADER_PX for p in panels[:-1])
    fig.update_layout(height=top + plot_px + bottom, margin=dict(t=top, b=bottom, l=LEFT_PX, r=RIGHT_PX),
                      legend_y=1 + (top - title_px) / plot_px)
    below = plot_px  # pixels from the plot area's bottom to the current panel's top
    for panel in panels:
        x, y = panel.axes
        domain = [(below - panel.lanes_px) / plot_px, below / plot_px]
        fig.update_layout({
            # Sizes and ink set on each panel's own axes (styled() styled only the axes there were when it ran),
            # so the lanes' names grow with the rest under presentation() and never take the theme's smaller,
            # fainter ticks (its grey has 3.7:1 on white).
            f"yaxis{y[1:]}": dict(domain=domain, anchor=x, autorange=False, range=[devices - 0.5, -0.5],
                                  tickmode="array", tickvals=list(range(devices)), showgrid=False, zeroline=False,
                                  ticktext=[lane_label(vocabulary, d) for d in range(devices)],
                                  tickfont=dict(size=TICK_SIZE, color=THEME_TEXT),
                                  title=dict(font=dict(size=AXIS_TITLE_SIZE, color=THEME_TEXT))),
            f"xaxis{x[1:]}": dict(anchor=y, domain=[0, 1], tickfont=dict(size=TICK_SIZE, color=THEME_TEXT),
                                  title=dict(font=dict(size=AXIS_TITLE_SIZE, color=THEME_TEXT))),
        })
        fig.add_annotation(text=f"<b>{titles[panel.name]}</b>", xref="paper", x=0, xanchor="left", xshift=-LEFT_PX + 12,
                           yref=f"{y} domain", y=1, yanchor="bottom", yshift=24, showarrow=False, align="left",
                           font=dict(size=15), name=f"{panel.name} panel")
        below -= panel.lanes_px + panel.axis_px + HEADER_PX
    fig.update_layout(barmode="overlay", bargap=0.1, dragmode="zoom", hovermode="closest")
    if notes:
        fig.add_annotation(text=notes, xref="paper", x=0, xanchor="left", xshift=-LEFT_PX + 12, yref="paper", y=0,
                           yanchor="top", yshift=-panels[-1].axis_px, showarrow=False, align="left",
                           font=dict(size=14), name="notes")


def timeline_figure(trace: Trace, first_batch: int = 0, batches: int | None = None, *, show: str = "both",
                    detail: bool | None = None) -> go.Figure:
    """Timeline of `batches` consecutive batches from `first_batch` (default: as many as the bound allows).

    show: "both" panels, or only the "steps" or the "measured" one. detail: draw every batch of the
    measured panel (True), one typical batch (False), or decide by the window (None: past DETAIL_BATCHES
    batches, typical)."""
    check_batch(trace, first_batch)
    limit = window_size(trace)
    count = limit if batches is None else batches
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= limit:
        raise ValueError(f"batches must be between 1 and {limit} for this trace, got {batches!r}")
    if show not in PANELS:
        raise ValueError(f"show must be one of {', '.join(PANELS)}, got {show!r}")
    last_batch = min(len(trace.batches), first_batch + count) - 1
    # Each engine's own layout (DDP: ranks are processes with an all-reduce row each).
    return trace.spec.part("timeline_range")(trace, first_batch, last_batch, show=show, detail=detail)


def timeline_details(fig: go.Figure) -> str | None:
    """What a timeline's notes leave out (why the times look so, how the axis was drawn), as markdown for an
    expander under the chart; None when the figure has none."""
    return chart_details(fig)

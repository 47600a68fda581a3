"""Step through: one animation frame per batch (play button and slider), each showing that batch's split.

Each frame is a bar per GPU (rows it got) with idle GPUs marked on the axis. Past MAX_FRAMES (or
MAX_MARKS over all frames) it steps through representative batches: the first, the last, the first
of every new split and evenly spaced ones, and says so.
"""
from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from ..tables import batch_split, chunks_per_batch
from ..trace import Trace
from .bounds import MAX_FRAMES, MAX_MARKS, representative_batches
from .colors import IDLE_GREY, OUTLINE, TEXT, device_color, device_pattern
from ..wording import device_list
from .style import backend_note, device_name, plural, rows_text, styled

FRAME_MS = 700  # long enough to read each frame's title while playing
# Pixel rows under the plot, top to bottom: tick labels and axis title, play/pause, the slider (its
# current value, the rail, the batch labels). The figure's height is fixed, so pixels are known.
HEIGHT, MARGIN_BOTTOM = 645, 235  # 310 px of plot, as before the controls were stacked
# Tick labels turn upright when the chart is too narrow for them level ("GPU 15": about 57 px), and
# the axis title moves down under them: room for that at any width. Measured in headless Chromium.
AXIS_PX = 106
BUTTONS_PX = 36  # a row of buttons at the house font size (33 px measured)
GAP_PX = 10
CURRENT_OFFSET_PX = 8  # between the slider's current value and its rail
SLIDER_PX = 80  # current value, rail, batch labels (74 px measured)


def prepare_steps(trace: Trace) -> pd.DataFrame:
    """split rows (one per batch and device) for the batches the animation steps through."""
    chunks = chunks_per_batch(trace)
    per_frame = 2 * max(1, len(trace.lanes))  # a bar and an idle marker per device at most
    limit = max(1, min(MAX_FRAMES, MAX_MARKS // per_frame - 1))  # -1: the initial frame is drawn twice
    batches = representative_batches(chunks, limit)
    return pd.concat([batch_split(trace, b) for b in batches], ignore_index=True)


def _story(part: pd.DataFrame, total_batches: int, devices: int) -> str:
    batch = int(part["batch"].iloc[0])
    used = part[part["used"]]
    idle = part.loc[~part["used"], "device"].tolist()
    sizes = ", ".join(str(r) for r in used["rows"])
    text = (f"Batch {batch:,} of {total_batches:,}: {plural(int(part['batch_rows'].iloc[0]), 'row')} → "
            f"{sizes} on {len(used)} of {plural(devices, 'GPU')}")
    return text + (f" ({device_list(idle)} idle)" if idle else "")


def _frame_data(part: pd.DataFrame, idle_y: float) -> list[go.BaseTraceType]:
    names = [device_name(d) for d in part["device"]]
    used = part["used"].to_numpy()
    bars = go.Bar(
        x=names, y=part["rows"],
        marker=dict(color=[device_color(d) if u else IDLE_GREY for d, u in zip(part["device"], used)],
                    pattern=dict(shape=[device_pattern(d) for d in part["device"]], fgcolor="white"),
                    line=dict(color=OUTLINE, width=0.6)),
        text=[str(r) if u else "" for r, u in zip(part["rows"], used)], textposition="outside",
        customdata=[rows_text(f, r) if u else "idle: no rows" for f, r, u in zip(part["first_row"], part["rows"], used)],
        hovertemplate="%{x}: %{customdata}<extra></extra>", name="rows per GPU", showlegend=False,
    )
    idle = part[~part["used"]]
    marks = go.Scatter(
        x=[device_name(d) for d in idle["device"]], y=[idle_y] * len(idle), mode="markers+text",
        marker=dict(symbol="x-thin", size=16, line=dict(width=3, color=IDLE_GREY)),
        text=["idle"] * len(idle), textposition="top center", textfont=dict(color="#555555"),
        hovertemplate="%{x}: idle, no rows of this batch<extra></extra>", name="idle", showlegend=False,
    )
    return [bars, marks]


def plot_steps(table: pd.DataFrame, *, devices: int, total_batches: int, notes: list[str]) -> go.Figure:
    """An animated bar chart: one frame per batch in `table`, with play/pause buttons and a slider."""
    parts = [part for _, part in table.groupby("batch", sort=True)]
    top = float(table["rows"].max()) * 1.2 or 1.0
    frames = [
        go.Frame(name=str(int(p["batch"].iloc[0])), data=_frame_data(p, idle_y=0.04 * top),
                 layout=go.Layout(title=dict(text=_story(p, total_batches, devices))))
        for p in parts
    ]
    fig = go.Figure(data=frames[0].data, frames=frames)
    play = dict(frame=dict(duration=FRAME_MS, redraw=True), transition=dict(duration=250), fromcurrent=True, mode="immediate")
    still = dict(frame=dict(duration=0, redraw=True), transition=dict(duration=0), mode="immediate")
    fig.update_layout(
        updatemenus=[dict(type="buttons", direction="left", x=0, xanchor="left", yanchor="top", showactive=False,
                          pad=dict(t=0, b=0, l=0, r=0),
                          buttons=[dict(label="▶ play", method="animate", args=[None, play]),
                                   dict(label="❚❚ pause", method="animate", args=[[None], still])])],
        sliders=[dict(active=0, x=0, len=1, xanchor="left", yanchor="top", pad=dict(t=0, b=0, l=0, r=0),
                      currentvalue=dict(prefix="batch ", offset=CURRENT_OFFSET_PX),
                      steps=[dict(label=f.name, method="animate", args=[[f.name], still]) for f in frames])],
    )
    fig.update_yaxes(title_text="rows of the batch on this GPU", range=[0, top], dtick=max(1, math.ceil(top / 6)))
    fig.update_xaxes(title_text="device", type="category", categoryorder="array",
                     categoryarray=[device_name(d) for d in range(devices)])
    fig.update_layout(font_color=TEXT)
    styled(fig, _story(parts[0], total_batches, devices), notes, height=HEIGHT)
    fig.update_layout(margin=dict(b=MARGIN_BOTTOM))
    return _place_controls(fig)


def _place_controls(fig: go.Figure) -> go.Figure:
    """Stack the controls under the axis: the play/pause row, then the slider (its current value on top).

    Side by side, the buttons covered the slider's current value whenever the chart was narrow, and the
    width is the page's; the height is fixed, so rows placed in pixels below the plot never meet."""
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b

    def below(px: float) -> float:  # paper y of a point `px` pixels under the plot's bottom edge
        return -px / plot_px

    fig.layout.updatemenus[0].y = below(AXIS_PX)
    fig.layout.sliders[0].y = below(AXIS_PX + BUTTONS_PX + GAP_PX)
    return fig


def step_figure(trace: Trace) -> go.Figure:
    """Animated split of each batch over the GPUs (representative batches past the bound)."""
    table = prepare_steps(trace)
    total = len(trace.batches)
    shown = int(table["batch"].nunique())
    notes = [backend_note(trace)]
    if shown < total:
        notes.append(f"{shown} of {total:,} batches: the first, the last, each new split and evenly spaced ones")
    return plot_steps(table, devices=len(trace.lanes), total_batches=total, notes=notes)

"""Split per batch: rows per device for every batch as stacked bars, with a grid of idle devices.

Top: one stacked bar per batch, one colour per device, so the short last batch stands out. Bottom:
a device x batch grid: the device's colour where it got rows, grey where it was idle (no replica), and
an empty cell ringed in the device's colour where a replica was called with no tensor rows (the
keyword pitfall: scatter_kwargs pads the positional arguments with empty tuples). The replica whose
error stopped the run is marked "✗ raised" in its cell, and its batch's bar says which GPU failed.
Past MAX_MARKS, consecutive batches with the same split share one bar labelled with the batch range
(a DataLoader makes every batch full but the last, so a run of any length usually needs two bars);
a failing batch always has a bar of its own.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.batch_facts import called_without_rows, chunks_per_batch
from dpviz.analysis.tables import batch_split
from dpviz.analysis.wording import counted, plural
from dpviz.trace import Trace
from dpviz.figures.bounds import MAX_MARKS, split_runs
from dpviz.figures.colors import GUIDE, IDLE_GREY, OUTLINE, device_color, device_colorscale, device_pattern, text_color_on, with_alpha
from dpviz.figures.layout import styled, title_block_px
from dpviz.figures.legends import legend_px
from dpviz.figures.sizes import GAP_PX, MARGIN, NARROWEST_PX, TICK_SIZE
from dpviz.figures.text_fit import text_px
from dpviz.figures.trace_words import device_name, rows_text

TEXT_CELLS = 400  # write rows / "idle" into the bars and cells only while they stay legible
THIN_BAR_PX = 8  # a bar narrower than this on the narrowest chart is drawn without outline or gap
EMPTY_FILL = with_alpha("#808080", 0.12)  # a called-with-no-rows cell: there, but holding nothing, on either page
IDLE_LABEL = "idle: no replica"
EMPTY_LABEL = "called, no rows"
RAISED = "✗ raised"
# The left margin, set: the devices' names beside the grid, the axis title's line and the gaps around them (105 px
# at 4 GPUs, 113 at 16, measured): plotly's automargin would take it anyway, leaving the legend above the plot
# less room than styled() planned.
NAMES_GAP_PX = 62
# The narrowest the chart is drawn: 452 px measured in an 800 px window (NARROWEST_PX, 468, the most it may be);
# the legend's rows are counted at 440, so they fit wherever the page's width falls between.
CHART_PX = 440


def _marks_per_bar(devices: int) -> int:
    return 2 * devices  # at most one bar segment and one grid cell per device


def _runs(trace: Trace, chunks: list[tuple[int, ...]], per_bar: int) -> list[tuple[int, int]]:
    if len(chunks) * per_bar <= MAX_MARKS:
        return [(i, i) for i in range(len(chunks))]
    runs = split_runs(chunks)
    failed = trace.failure.batch if trace.failure is not None else None
    if failed is not None and runs[-1][0] < failed:  # the run stopped there: the failing batch is the last
        runs[-1:] = [(runs[-1][0], failed - 1), (failed, failed)]
    return runs[: MAX_MARKS // per_bar]


def _states(trace: Trace, batch: int) -> tuple[list[str], list[bool]]:
    """Per lane of `batch`: "rows", EMPTY_LABEL or "idle", and whether it is the replica that raised."""
    forwards = {s.lane: s for s in trace.replicas(batch)}
    failure = trace.failure
    states, raised = [], []
    for lane in trace.lanes:
        span = forwards.get(lane.id)
        states.append("idle" if span is None else EMPTY_LABEL if called_without_rows(span) else "rows")
        raised.append(span is not None and failure is not None and failure.batch == batch
                      and failure.replica is not None and span.replica == failure.replica)
    return states, raised


def prepare_split(trace: Trace) -> pd.DataFrame:
    """One row per (bar, device). A bar is one batch, or past MAX_MARKS a run of batches with the same split.
    `state`: "rows", "called, no rows" or "idle"; `raised`: the replica whose error stopped the run."""
    chunks = chunks_per_batch(trace)
    runs = _runs(trace, chunks, _marks_per_bar(len(trace.lanes)))
    frames = []
    for bar, (first, last) in enumerate(runs):
        table = batch_split(trace, first)
        table["state"], table["raised"] = _states(trace, first)
        table.insert(0, "bar", bar)
        table["first_batch"], table["last_batch"] = first, last
        table["batches"] = last - first + 1
        table["label"] = counted(first) if first == last else f"{counted(first)}-{counted(last)}<br>({last - first + 1:,} batches)"
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def plot_split(table: pd.DataFrame, *, devices: int, title: str, notes: list[str], x_title: str) -> go.Figure:
    """Stacked bars of rows per device per bar over a grid of used (device colour) and idle (grey) devices."""
    # The grid gets a fixed height per device so every name fits; the bars what is left of about 360 px, so
    # at 8 GPUs the whole chart, its title and legend above, sits on a projector's first screen (1024 × 768).
    grid_px = 20 * devices
    bars_px = max(160, 340 - grid_px)  # the bars give up what the legend's rows take: a projector's first screen
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[bars_px, grid_px], vertical_spacing=0.05)
    labels = table.drop_duplicates("bar")["label"].tolist()
    bars = len(labels)
    show_text = bars * devices <= TEXT_CELLS
    # Past about 8 px a bar on the narrowest chart, outlines and gaps would outweigh the bars themselves.
    thin = (NARROWEST_PX - 110) / max(bars, 1) < THIN_BAR_PX
    outline = dict(color=OUTLINE, width=0 if thin else 0.6)
    for device in range(devices):
        part = table[(table["device"] == device) & (table["state"] == "rows")]
        hover = [
            f"{plural(n, 'batch')} (batches {counted(a)}-{counted(b)})" if n > 1 else f"batch {counted(a)}"
            for n, a, b in zip(part["batches"], part["first_batch"], part["last_batch"])
        ]
        fig.add_trace(
            go.Bar(
                x=part["label"], y=part["rows"], name=device_name(device), legendgroup=device_name(device),
                marker=dict(color=device_color(device), line=outline,
                            pattern=dict(fillmode="overlay", shape=device_pattern(device), fgcolor="white")),
                text=part["rows"] if show_text else None, textposition="inside", insidetextanchor="middle", textangle=0,
                # Set per device: left to the renderer or a theme, white can land on GPU 6's yellow.
                insidetextfont=dict(color=text_color_on(device_color(device))),
                customdata=np.column_stack([hover, [rows_text(f, r) for f, r in zip(part["first_row"], part["rows"])]])
                if len(part) else None,
                hovertemplate=f"{device_name(device)}<br>%{{customdata[0]}}<br>%{{customdata[1]}}<extra></extra>",
            ),
            row=1, col=1,
        )
    if (table["state"] == "idle").any():  # legend entry only: idle has no bar segment, it shows in the grid below
        fig.add_trace(
            go.Bar(x=[None], y=[None], name=IDLE_LABEL, marker=dict(color=IDLE_GREY, line=dict(color=OUTLINE, width=0.6))),
            row=1, col=1,
        )
    pivot = lambda column: table.pivot(index="device", columns="bar", values=column).to_numpy()
    grid, state = pivot("device").astype(float), pivot("state")
    grid[state == "idle"] = -1
    grid[state == EMPTY_LABEL] = np.nan  # no fill: the cell is ringed in the device's colour instead
    fig.add_trace(
        go.Heatmap(
            z=grid, x=labels, y=[device_name(d) for d in range(devices)],
            colorscale=device_colorscale(devices), zmin=-1.5, zmax=devices - 0.5, showscale=False,
            xgap=0 if thin else 2, ygap=2,
            text=np.where(state == "idle", "idle", "") if show_text else None, texttemplate="%{text}" if show_text else None,
            textfont=dict(size=13, color=text_color_on(IDLE_GREY)),  # only idle cells have text
            customdata=np.select([state == "rows", state == "idle"], ["got rows", "idle: no replica ran there"],
                                 "called with no tensor rows (the keywords alone)"),
            hovertemplate="%{y}, %{x}: %{customdata}<extra></extra>",
        ),
        row=2, col=1,
    )
    _mark_empty_and_raised(fig, table, labels)
    fig.update_layout(barmode="stack", bargap=0.25, uniformtext=dict(minsize=11, mode="hide"))
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_xaxes(type="category", title_text=x_title, row=2, col=1)
    fig.update_yaxes(title_text="rows of the batch", row=1, col=1)
    fig.update_yaxes(autorange="reversed", title_text="device", tickmode="linear", row=2, col=1)
    left = math.ceil(text_px(device_name(devices - 1), TICK_SIZE)) + NAMES_GAP_PX
    return _room_for_legend(styled(fig, title, notes, height=bars_px + grid_px + 200), left)


def _room_for_legend(fig: go.Figure, left: int) -> go.Figure:
    """The `left` margin the axes' names take, and above the plot the rows the legend takes over what that
    leaves of the narrowest chart (a row more than styled() kept, at 4 GPUs): the top margin and the
    height grow by them, so the legend stays under the subtitle and the grid keeps rows a presented name fits."""
    need = title_block_px(fig) + GAP_PX + legend_px(fig, CHART_PX, margins=(left, MARGIN["r"]))
    grow = max(need - fig.layout.margin.t, 0)
    return fig.update_layout(margin=dict(l=left, t=fig.layout.margin.t + grow), height=fig.layout.height + grow)


def _mark_empty_and_raised(fig: go.Figure, table: pd.DataFrame, labels: list[str]) -> None:
    """Ring each called-with-no-rows cell in its device's colour (dashed, on the page's background), write
    what happened in it, and say over the failing batch's bar which GPU raised. Few cells: a failing batch's."""
    empty = table[(table["state"] == EMPTY_LABEL) | table["raised"]]
    for r in empty.itertuples():
        x = labels.index(r.label)
        fig.add_shape(type="rect", x0=x - 0.45, x1=x + 0.45, y0=r.device - 0.42, y1=r.device + 0.42, xref="x2", yref="y2",
                      line=dict(color=device_color(r.device), width=2, dash="dot" if r.state == EMPTY_LABEL else "solid"),
                      fillcolor=EMPTY_FILL if r.state == EMPTY_LABEL else None, layer="above")
    on_fill = empty["state"] == "rows"  # a raised replica that got rows: its words sit on its colour
    for part, color in ((empty[~on_fill], None), (empty[on_fill], [text_color_on(device_color(d)) for d in empty.loc[on_fill, "device"]])):
        if len(part):  # on the background, the words take the page's own text colour
            fig.add_trace(go.Scatter(
                x=part["label"], y=[device_name(d) for d in part["device"]], mode="text", showlegend=False, hoverinfo="skip",
                text=[RAISED if r else "no rows" for r in part["raised"]], textfont=dict(size=12, color=color)), row=2, col=1)
    if (table["state"] == EMPTY_LABEL).any():
        fig.add_trace(go.Scatter(  # the legend's entry for the ringed cells
            x=[None], y=[None], mode="markers", name=EMPTY_LABEL,
            marker=dict(symbol="square-open", size=14, color=GUIDE, line=dict(width=2))), row=1, col=1)
    for r in table[table["raised"]].itertuples():
        top = int(table.loc[table["bar"] == r.bar, "rows"].sum())  # the bar's own top
        fig.add_annotation(x=r.label, y=top, xref="x", yref="y", yanchor="bottom", showarrow=False,
                           text=f"{RAISED}<br>{device_name(r.device)}", font=dict(size=13))



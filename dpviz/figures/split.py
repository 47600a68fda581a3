"""Split per batch: rows per device for every batch as stacked bars, with a grid of idle devices.

Top: one stacked bar per batch, one colour per device, so the short last batch stands out. Bottom:
a device x batch grid, grey where a device got no rows. Past MAX_MARKS, consecutive batches with the
same split share one bar labelled with the batch range (a DataLoader makes every batch full but the
last, so a run of any length usually needs two bars).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..tables import batch_split, chunks_per_batch
from ..trace import Trace
from .bounds import MAX_MARKS, batch_label, split_runs
from .colors import IDLE_GREY, OUTLINE, device_color, device_colorscale, device_pattern, text_color_on
from .split_ddp import split_ddp_figure
from .style import backend_note, device_name, plural, rows_text, styled

TEXT_CELLS = 400  # write rows / "idle" into the bars and cells only while they stay legible


def _marks_per_bar(devices: int) -> int:
    return 2 * devices  # at most one bar segment and one grid cell per device


def prepare_split(trace: Trace) -> pd.DataFrame:
    """One row per (bar, device). A bar is one batch, or past MAX_MARKS a run of batches with the same split."""
    chunks = chunks_per_batch(trace)
    per_bar = _marks_per_bar(len(trace.lanes))
    if len(chunks) * per_bar <= MAX_MARKS:
        runs = [(i, i) for i in range(len(chunks))]
    else:
        runs = split_runs(chunks)[: MAX_MARKS // per_bar]
    frames = []
    for bar, (first, last) in enumerate(runs):
        table = batch_split(trace, first)
        table.insert(0, "bar", bar)
        table["first_batch"], table["last_batch"] = first, last
        table["batches"] = last - first + 1
        table["label"] = f"{first:,}" if first == last else f"{first:,}-{last:,}<br>({last - first + 1:,} batches)"
        frames.append(table)
    return pd.concat(frames, ignore_index=True)


def plot_split(table: pd.DataFrame, *, devices: int, title: str, notes: list[str], x_title: str) -> go.Figure:
    """Stacked bars of rows per device per bar over a grid of used (device colour) and idle (grey) devices."""
    bars_px, grid_px = 380, 26 * devices  # the grid gets a fixed height per device so every name fits
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[bars_px, grid_px], vertical_spacing=0.05)
    labels = table.drop_duplicates("bar")["label"].tolist()
    bars = len(labels)
    show_text = bars * devices <= TEXT_CELLS
    for device in range(devices):
        part = table[(table["device"] == device) & table["used"]]
        hover = [
            f"{plural(n, 'batch')} ({batch_label(a, b)})" if n > 1 else batch_label(a, b)
            for n, a, b in zip(part["batches"], part["first_batch"], part["last_batch"])
        ]
        fig.add_trace(
            go.Bar(
                x=part["label"], y=part["rows"], name=device_name(device), legendgroup=device_name(device),
                marker=dict(color=device_color(device), line=dict(color=OUTLINE, width=0.6),
                            pattern=dict(shape=device_pattern(device), fgcolor="white")),
                text=part["rows"] if show_text else None, textposition="inside", insidetextanchor="middle", textangle=0,
                # Set per device: left to the renderer or a theme, white can land on GPU 6's yellow.
                insidetextfont=dict(color=text_color_on(device_color(device))),
                customdata=np.column_stack([hover, [rows_text(f, r) for f, r in zip(part["first_row"], part["rows"])]])
                if len(part) else None,
                hovertemplate=f"{device_name(device)}<br>%{{customdata[0]}}<br>%{{customdata[1]}}<extra></extra>",
            ),
            row=1, col=1,
        )
    fig.add_trace(  # legend entry only: idle has no bar segment, it shows in the grid below
        go.Bar(x=[None], y=[None], name="idle (no rows)", marker=dict(color=IDLE_GREY, line=dict(color=OUTLINE, width=0.6))),
        row=1, col=1,
    )
    grid = table.pivot(index="device", columns="bar", values="device").to_numpy(dtype=float, copy=True)
    used = table.pivot(index="device", columns="bar", values="used").to_numpy(dtype=bool)
    grid[~used] = -1
    fig.add_trace(
        go.Heatmap(
            z=grid, x=labels, y=[device_name(d) for d in range(devices)],
            colorscale=device_colorscale(devices), zmin=-1.5, zmax=devices - 0.5, showscale=False,
            xgap=2, ygap=2,
            text=np.where(used, "", "idle") if show_text else None, texttemplate="%{text}" if show_text else None,
            textfont=dict(size=13, color=text_color_on(IDLE_GREY)),  # only idle cells have text
            customdata=np.where(used, "got rows", "idle: no rows"),
            hovertemplate="%{y}, %{x}: %{customdata}<extra></extra>",
        ),
        row=2, col=1,
    )
    fig.update_layout(barmode="stack", bargap=0.25, uniformtext=dict(minsize=11, mode="hide"))
    fig.update_xaxes(type="category", row=1, col=1)
    fig.update_xaxes(type="category", title_text=x_title, row=2, col=1)
    fig.update_yaxes(title_text="rows of the batch", row=1, col=1)
    fig.update_yaxes(autorange="reversed", title_text="device", tickmode="linear", row=2, col=1)
    return styled(fig, title, notes, height=bars_px + grid_px + 200)


def split_figure(trace: Trace) -> go.Figure:
    """Rows per device for every batch (stacked bars) and which devices sat idle (grey grid); under DDP,
    rows per rank for every step, the sampler's repeated rows hatched."""
    if trace.engine == "ddp":
        return split_ddp_figure(trace)
    table = prepare_split(trace)
    total = len(trace.batches)
    bars = int(table["bar"].nunique())
    shown = int(table.drop_duplicates("bar")["batches"].sum())
    grouped = bars < shown
    devices = len(trace.lanes)
    idle = sum(devices - len(c) for c in chunks_per_batch(trace))  # the whole run, even if bars are cut
    title = f"Rows per GPU in each of {plural(total, 'batch')}"
    title += f" ({plural(idle, 'idle device slot')})" if idle else " (no GPU idle)"
    notes = [backend_note(trace)]
    if grouped:
        notes.append(f"{plural(shown, 'batch')} in {plural(bars, 'bar')}: consecutive batches with the same split share one bar")
    if shown < total:
        notes.append(f"first {plural(shown, 'batch')} of {total:,} shown (at most {MAX_MARKS:,} marks)")
    x_title = "batches (a range shares one bar)" if grouped else "batch"
    return plot_split(table, devices=devices, title=title, notes=notes, x_title=x_title)

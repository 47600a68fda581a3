"""Sample map: which dataset row went to which batch and which device.

Top: every dataset row at (row id, batch), coloured by the GPU that processed it; the shuffle shows as
scatter, no shuffle as a staircase. Bottom: every batch laid out row by row, coloured by GPU; each
GPU holds one contiguous slice of its batch. Past MAX_MARKS both panels are binned and say so.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..trace import Trace
from .bounds import MAX_MARKS
from .colors import device_color, device_colorscale, device_symbol
from .style import backend_note, device_name, plural, styled

TEXT_CELLS = 400  # write dataset row ids into the cells only while they stay legible
ROW_BINS, BATCH_BINS = 100, 40  # binned mode: 2 panels x 100 x 40 cells = 8,000 marks


def prepare_sample_map(trace: Trace) -> pd.DataFrame:
    """One row per processed dataset row: sample id, batch, position in the batch and device (-1: none)."""
    lengths = np.array([b.rows for b in trace.batches], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(lengths) else np.zeros(0, np.int64)
    total = int(lengths.sum())
    sample = np.fromiter((i for b in trace.batches for i in b.sample_ids), dtype=np.int64, count=total)
    batch = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(total) - np.repeat(starts, lengths)
    device = np.full(total, -1, dtype=np.int64)
    for span in trace.spans:
        if span.phase == "forward" and span.lane is not None:
            base = starts[span.batch] + span.row_offset
            device[base : base + span.rows] = span.lane
    return pd.DataFrame({"sample": sample, "batch": batch, "position": position, "device": device})


def _exact(fig: go.Figure, table: pd.DataFrame, devices: int) -> None:
    size = float(np.clip(900 / max(1, np.sqrt(len(table))) / 3, 4, 14))
    for d in range(devices):
        part = table[table["device"] == d]
        fig.add_trace(go.Scatter(
            x=part["sample"].to_numpy(), y=part["batch"].to_numpy(), mode="markers", name=device_name(d),
            marker=dict(color=device_color(d), symbol=device_symbol(d), size=size, line=dict(width=0)),
            customdata=part["position"].to_numpy(),
            hovertemplate=f"dataset row %{{x}} → batch %{{y}}, row %{{customdata}} of the batch → {device_name(d)}<extra></extra>",
        ), row=1, col=1)
    width = int(table["position"].max()) + 1
    batches = int(table["batch"].max()) + 1
    grid = np.full((batches, width), np.nan)
    ids = np.full((batches, width), -1, dtype=np.int64)
    grid[table["batch"], table["position"]] = table["device"]
    ids[table["batch"], table["position"]] = table["sample"]
    text = np.where(ids >= 0, ids.astype(str), "") if batches * width <= TEXT_CELLS else None
    fig.add_trace(go.Heatmap(
        z=grid, colorscale=device_colorscale(devices), zmin=-1.5, zmax=devices - 0.5, showscale=False,
        xgap=1, ygap=2, hoverongaps=False, customdata=ids, text=text, texttemplate="%{text}" if text is not None else None,
        textfont=dict(size=11),
        hovertemplate="batch %{y}, row %{x} of the batch: dataset row %{customdata} → GPU %{z}<extra></extra>",
    ), row=2, col=1)


def _edges(count: int, bins: int) -> np.ndarray:
    return np.unique(np.linspace(0, count, min(bins, count) + 1).round().astype(np.int64))


def _binned(fig: go.Figure, table: pd.DataFrame, devices: int, data_size: int, batches: int) -> tuple[int, int]:
    row_edges = _edges(max(data_size, int(table["sample"].max()) + 1), ROW_BINS)
    # The last batch gets a bin of its own: it is the one whose split differs.
    batch_edges = np.append(_edges(batches - 1, BATCH_BINS - 1), batches) if batches > 1 else _edges(batches, 1)
    counts, _, _ = np.histogram2d(table["batch"], table["sample"], bins=[batch_edges, row_edges])
    batch_labels = [f"{a:,}-{b - 1:,}" if b - a > 1 else f"{a:,}" for a, b in zip(batch_edges[:-1], batch_edges[1:])]
    row_mid = (row_edges[:-1] + row_edges[1:]) / 2
    fig.add_trace(go.Heatmap(
        z=counts, x=row_mid, y=batch_labels, colorscale="Cividis",
        colorbar=dict(title="rows", len=0.4, y=1.0, yanchor="top", x=1.01, thickness=14),
        hovertemplate="dataset rows near %{x:,.0f}, batches %{y}: %{z:,} rows<extra></extra>",
    ), row=1, col=1)
    # Bottom: each batch bin drawn as its first batch, cut into position bins, coloured by the GPU
    # that holds the middle row of each bin.
    width = int(table["position"].max()) + 1
    pos_edges = _edges(width, ROW_BINS)
    pos_mid = ((pos_edges[:-1] + pos_edges[1:]) // 2).astype(np.int64)
    by_slot = table.set_index(["batch", "position"])["device"]
    grid = np.full((len(batch_edges) - 1, len(pos_mid)), np.nan)
    for i, first in enumerate(batch_edges[:-1]):
        keys = pd.MultiIndex.from_arrays([np.full(len(pos_mid), first), pos_mid])
        grid[i] = by_slot.reindex(keys).to_numpy(dtype=float)
    fig.add_trace(go.Heatmap(
        z=grid, x=pos_mid, y=batch_labels, colorscale=device_colorscale(devices), zmin=-1.5,
        zmax=devices - 0.5, showscale=False, hoverongaps=False,
        hovertemplate="batches %{y}, rows near %{x:,} of the batch → GPU %{z}<extra></extra>",
    ), row=2, col=1)
    for d in range(devices):  # legend entries for the device colours of the bottom panel
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=device_name(d),
                                 marker=dict(color=device_color(d), symbol=device_symbol(d), size=12)), row=2, col=1)
    return len(row_edges) - 1, len(batch_edges) - 1


def exact_marks(table: pd.DataFrame) -> int:
    """Marks of the unbinned map: a point per dataset row plus a cell per (batch, row of the longest batch)."""
    if table.empty:
        return 0
    return len(table) + (int(table["batch"].max()) + 1) * (int(table["position"].max()) + 1)


def plot_sample_map(table: pd.DataFrame, *, devices: int, data_size: int, batches: int,
                    title: str, notes: list[str]) -> go.Figure:
    """Two panels: dataset row -> batch (coloured by GPU), and each batch's rows coloured by GPU."""
    exact = exact_marks(table) <= MAX_MARKS
    top = "Where each dataset row went (colour: GPU)" if exact else "Where the dataset rows went (binned counts)"
    bottom = "Inside each batch: one contiguous slice per GPU" + (" (numbers: dataset rows)" if exact and batches * (int(table["position"].max()) + 1) <= TEXT_CELLS else "")
    fig = make_subplots(rows=2, cols=1, row_heights=[0.5, 0.5], vertical_spacing=0.14, subplot_titles=(top, bottom))
    if exact:
        _exact(fig, table, devices)
        fig.update_xaxes(title_text="dataset row (index into the dataset)", row=1, col=1)
        fig.update_xaxes(title_text="row within the batch (as DataParallel splits it)", row=2, col=1)
    else:
        row_bins, batch_bins = _binned(fig, table, devices, data_size, batches)
        notes = notes + [f"binned: {row_bins} × {batch_bins} cells per panel, {plural(len(table), 'row')} in all"]
        fig.update_xaxes(title_text=f"dataset row (binned into {row_bins} ranges)", row=1, col=1)
        fig.update_xaxes(title_text="row within the batch (binned; colour: GPU holding the bin's middle row)", row=2, col=1)
    for row in (1, 2):
        if exact:
            # Whole batch numbers only, one tick per batch up to ~12 ticks, and no padding beyond them.
            fig.update_yaxes(title_text="batch", range=[batches - 0.5, -0.5], tickmode="linear", tick0=0,
                             dtick=max(1, -(-batches // 12)), tickformat=",d", row=row, col=1)
        else:  # bin labels like "0-25" would otherwise be read as dates
            fig.update_yaxes(title_text="batches (binned)", autorange="reversed", type="category", row=row, col=1)
    # The legend sits beside the bottom panel so the top panel's colour bar has room.
    fig.update_layout(legend=dict(itemsizing="constant", y=0.45 if not exact else 1.0, yanchor="top"))
    return styled(fig, title, notes, height=820)


def sample_map_figure(trace: Trace) -> go.Figure:
    """Which dataset row went to which batch and which GPU: the shuffle and the contiguous slices."""
    table = prepare_sample_map(trace)
    config = trace.config
    order = "shuffled (shuffle=True)" if config.shuffle else "in order (shuffle=False)"
    title = f"{plural(len(table), 'dataset row')} in {plural(len(trace.batches), 'batch')}, {order}"
    return plot_sample_map(table, devices=len(trace.lanes), data_size=config.data_size, batches=len(trace.batches),
                           title=title, notes=[backend_note(trace)])

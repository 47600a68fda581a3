"""Sample map: which dataset row went to which batch and which device.

Top: every dataset row at (row id, batch), coloured by the GPU that processed it; the shuffle shows as
scatter, no shuffle as a staircase. Bottom: every batch laid out row by row, coloured by GPU; each
GPU holds one contiguous slice of its batch. The top panel's markers are sized from the width a dataset
row gets, so they never overlap; when that would make them too small to see it is binned instead, and
past MAX_MARKS so is the bottom panel. Each binned panel says so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.trace import Trace
from dpviz.figures.bounds import MAX_MARKS
from dpviz.figures.colors import (
    IDLE_GREY, OUTLINE, device_color, device_colorscale, device_pattern, device_symbol, text_color_on, with_alpha,
)
from dpviz.analysis.wording import plural
from dpviz.figures.layout import styled
from dpviz.figures.presenting import CELL_TEXT, TICK_GAP_PX
from dpviz.figures.sizes import AXIS_TITLE_SIZE, BASE_TOP_PX, FONT_SIZE, LINE_EM, MARGIN, NARROWEST_PX, TICK_SIZE
from dpviz.figures.text_fit import line_count, text_px, wrap
from dpviz.figures.timeline_scale import nice_step

TEXT_CELLS = 400  # write dataset row ids into the cells only while they stay legible
ROW_BINS, BATCH_BINS = 100, 40  # binned mode: 2 panels x 100 x 40 cells = 8,000 marks
HEIGHT = 560  # with its title and legend, on a projector's first screen (1024 × 768)
PRESENTING_SCALE = 1.35  # presentation()'s type: the device numbers must clear each other there too
FIRST = 1  # the first batch (or step) as the map numbers it: from 1, as every view a reader sees does
# The plot's width is the page's: assume a narrow one (a 1,000 px chart less its margins and legend);
# a wider page only adds room between markers. The top panel's height follows from HEIGHT.
PLOT_PX, TOP_PANEL_PX = 760, round((HEIGHT - 100 - 60) * (1 - 0.18) / 2)  # HEIGHT less the margins and the gap, halved
MARKER_FILL = 0.85  # a marker's share of its row's width: the rest is the gap to its neighbours
MIN_MARKER_PX, MAX_MARKER_PX = 3, 14  # smaller than MIN_MARKER_PX the colour is lost: bin instead
# A row id's type: as large as its cell holds on the narrowest chart, up to ID_SIZE; under MIN_ID_SIZE,
# which reads from the back of a classroom, none (the hover gives every cell's id).
ID_SIZE, MIN_ID_SIZE = 14, 12
# The binned top panel counts rows in grey, light for few and dark for many: no hue that reads as a GPU's.
# Empty cells (rows of other batches) stay clear. Both ends show on the white and on the dark page.
COUNT_LOW, COUNT_HIGH, CLEAR = "#CFCFCF", "#5E5E5E", "rgba(0,0,0,0)"


@dataclass(frozen=True)
class MapWords:
    """How the map names its lanes, its batches and the layout of its bottom panel (DataParallel's by default)."""

    lane: str = "GPU"  # 'GPU 3', 'rank 3'
    batch: str = "batch"  # a DataLoader batch, or a DDP step
    batches: str = "batches"
    bottom: str = "Inside each batch: one contiguous slice per GPU"
    bottom_x: str = "row within the batch (as DataParallel splits it)"
    repeats: tuple[tuple[int, int], ...] = ()  # (batch, position) of rows loaded again: DDP's padding
    dropped: tuple[tuple[int, int], ...] = ()  # (dataset row, last batch of its epoch) of rows never loaded: drop_last
    epochs: tuple[int, ...] = ()  # the first batch (0-based) of each epoch, when there are several: DDP's epochs

    def name(self, lane: int) -> str:
        return f"{self.lane} {lane}"


DP_WORDS = MapWords()
REPEAT_NAME = "loaded again (padding)"
DROPPED_NAME = "never loaded"  # the note says why (drop_last); the legend keeps to two rows on the narrowest chart


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


def marker_size(data_rows: int, batches: int, *, plot_px: float = PLOT_PX, panel_px: float = TOP_PANEL_PX) -> float:
    """Side in pixels of a top-panel marker: one dataset row's share of the width (or one batch's of
    the height, if less), less a gap, so neighbouring markers never overlap; at most MAX_MARKER_PX."""
    pitch = min(plot_px / max(1, data_rows), panel_px / max(1, batches))
    return float(min(MAX_MARKER_PX, pitch * MARKER_FILL))


def top_is_exact(table: pd.DataFrame, data_size: int) -> bool:
    """A marker per dataset row while markers stay big enough to see without overlapping, and the
    whole map stays under MAX_MARKS; otherwise the top panel is binned."""
    if table.empty:
        return True
    batches = int(table["batch"].max()) + 1
    rows = max(data_size, int(table["sample"].max()) + 1)
    return marker_size(rows, batches) >= MIN_MARKER_PX and exact_marks(table) <= MAX_MARKS


def _exact_top(fig: go.Figure, table: pd.DataFrame, devices: int, data_rows: int, words: MapWords = DP_WORDS) -> int:
    size = marker_size(data_rows, int(table["batch"].max()) + 1)
    noun = words.batch
    for d in range(devices):
        part = table[table["device"] == d]
        fig.add_trace(go.Scatter(
            x=part["sample"].to_numpy(), y=part["batch"].to_numpy() + FIRST, mode="markers", name=words.name(d),
            # A thin outline: the light colours (GPU 6's yellow) have under 3:1 against a white page.
            marker=dict(color=device_color(d), symbol=device_symbol(d), size=size, line=dict(width=0.5, color=OUTLINE)),
            customdata=part["position"].to_numpy(),
            hovertemplate=f"dataset row %{{x}} → {noun} %{{y}}, row %{{customdata}} of the {noun} → {words.name(d)}<extra></extra>",
        ), row=1, col=1)
    if words.repeats:
        _repeat_rings(fig, table, words, size, row=1, x="sample", y="batch")
    if words.dropped:
        _dropped_crosses(fig, words, size)
    # No padding: the width is split evenly between the dataset's rows, as marker_size assumed.
    fig.update_xaxes(range=[-0.5, data_rows - 0.5], row=1, col=1)
    return len(table)


RING_LEGEND = "#808080"  # the legend's ring: a mid grey, 3.9:1 on white and 4.8:1 on the dark page


def _repeat_rings(fig: go.Figure, table: pd.DataFrame, words: MapWords, size: float, *, row: int, x: str, y: str) -> None:
    """A ring around every row loaded again, in one legend entry; each ring dark or white for contrast
    with the colour of the mark it circles (text_color_on), so it shows on any page and any device."""
    keys = set(words.repeats)
    part = table[[(b, p) in keys for b, p in zip(table["batch"], table["position"])]]
    rings = [text_color_on(device_color(d) if d >= 0 else IDLE_GREY) for d in part["device"]]
    fig.add_trace(go.Scatter(
        x=part[x].to_numpy(), y=part[y].to_numpy() + FIRST, mode="markers", name=REPEAT_NAME, legendgroup=REPEAT_NAME,
        showlegend=False, marker=dict(symbol="circle-open", size=max(8.0, size * 1.5), color=rings, line=dict(width=2)),
        customdata=part["sample"].to_numpy(),
        hovertemplate=f"dataset row %{{customdata}}, loaded again in this epoch (DistributedSampler's padding)<extra></extra>",
    ), row=row, col=1)
    if row == 1:  # the legend's entry, in a grey that reads on either page
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=REPEAT_NAME, legendgroup=REPEAT_NAME,
                                 marker=dict(symbol="circle-open", size=12, color=RING_LEGEND, line=dict(width=2))),
                      row=row, col=1)


def _dropped_crosses(fig: go.Figure, words: MapWords, size: float) -> None:
    """A grey cross in the column of every dataset row its epoch never loaded, just under the epoch's last step: the
    row a class looks for and does not find."""
    rows, steps = zip(*words.dropped)
    fig.add_trace(go.Scatter(
        x=list(rows), y=[step + FIRST + 0.32 for step in steps], mode="markers", name=DROPPED_NAME,
        marker=dict(symbol="x-thin-open", size=max(10.0, size * 1.2), color=RING_LEGEND, line=dict(width=2.5)),
        hovertemplate=f"dataset row %{{x}}: never loaded in this epoch (DistributedSampler(drop_last=True))<extra></extra>",
    ), row=1, col=1)


def _epoch_marks(fig: go.Figure, epochs: tuple[int, ...]) -> None:
    """Where each epoch starts, in the top panel (one row per batch, on the page's own colour): a dashed line over its
    first batch across the panel, and in the right margin the epoch's name beside it (a class compares the epochs'
    rows: set_epoch forgotten, they repeat). Not over the bottom panel's cells, where no grey reads on every colour."""
    for epoch, first in enumerate(epochs, start=1):
        if first > 0:
            fig.add_shape(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=first + FIRST - 0.5,
                          y1=first + FIRST - 0.5, line=dict(color=RING_LEGEND, width=2, dash="dash"),
                          name=f"epoch {epoch} starts")
        fig.add_annotation(xref="x domain", x=1, xanchor="left", xshift=6, yref="y", y=first + FIRST, yanchor="middle",
                           text=f"epoch {epoch}", showarrow=False, name=f"epoch {epoch}")


def _exact_bottom(fig: go.Figure, table: pd.DataFrame, devices: int, words: MapWords = DP_WORDS) -> None:
    width = int(table["position"].max()) + 1
    batches = int(table["batch"].max()) + 1
    grid = np.full((batches, width), np.nan)
    ids = np.full((batches, width), -1, dtype=np.int64)
    grid[table["batch"], table["position"]] = table["device"]
    ids[table["batch"], table["position"]] = table["sample"]
    fig.add_trace(go.Heatmap(
        z=grid, y=np.arange(batches) + FIRST, colorscale=device_colorscale(devices), zmin=-1.5, zmax=devices - 0.5,
        showscale=False,
        # (its dataset row, its place in the step counted from FIRST as the ticks count it)
        xgap=1, ygap=2, hoverongaps=False, customdata=np.dstack([ids, np.broadcast_to(np.arange(width) + FIRST, ids.shape)]),
        hovertemplate=f"{words.batch} %{{y}}, row %{{customdata[1]}} of the {words.batch}: dataset row %{{customdata[0]}} → "
                      f"{words.lane} %{{z}}<extra></extra>",
    ), row=2, col=1)
    size = id_size(table) if batches * width <= TEXT_CELLS else None
    if devices > 8:
        _hatch_cells(fig, table, batches, with_ids=size is not None)
    if size is not None:
        _cell_ids(fig, table, size)
    if words.repeats:
        _repeat_rings(fig, table, words, 12.0, row=2, x="position", y="batch")
    fig.update_xaxes(range=[-0.5, width - 0.5], row=2, col=1)  # the cells, without a text trace's padding
    # Past 8 devices the colours repeat (hatched) and, with no row ids in the cells, nothing else says whose slice
    # is whose: each slice's device under it.
    ticks = slice_ticks(table, width, words) if devices > 8 and size is None else {}
    fig.update_xaxes(**(ticks or position_ticks(width)), row=2, col=1)


def position_ticks(width: int) -> dict:
    """Ticks under the grid at whole rows of the step, numbered from FIRST as a reader counts them (1, 5, 10, ...),
    up to about a dozen: plotly's own would put -0.5, 0, 0.5 under a step of three rows."""
    step = int(nice_step(max(1.0, width / 12)))
    numbers = sorted({FIRST, *range(step, width + FIRST, step)})
    return dict(tickmode="array", tickvals=[n - FIRST for n in numbers], ticktext=[f"{n:,}" for n in numbers])


def slice_ticks(table: pd.DataFrame, width: int, words: MapWords = DP_WORDS) -> dict:
    """Ticks under the grid naming the device of each slice of the first batch, at the slice's middle: its
    number under an axis titled by the device's noun, every k-th where even the numbers would run together at
    Presenting's larger type on the narrowest chart (as dpviz.figures.compare.device_ticks). None where a
    device's rows are not one slice (DDP's sampler deals them out in turn): the axis keeps its positions."""
    first = table[table["batch"] == table["batch"].min()]
    slices = first.groupby("device")["position"].agg(["min", "max", "count"]).sort_index()
    slices = slices[slices.index >= 0]
    if slices.empty or ((slices["max"] - slices["min"] + 1) != slices["count"]).any():
        return {}
    slot = (NARROWEST_PX - MARGIN["l"] - MARGIN["r"]) * float(slices["count"].min()) / width
    size = TICK_SIZE * PRESENTING_SCALE
    numbers = [str(int(d)) for d in slices.index]
    step = max(1, -int(-(max(text_px(n, size) for n in numbers) + TICK_GAP_PX) // slot))
    middles = ((slices["min"] + slices["max"]) / 2).tolist()
    return dict(tickmode="array", tickvals=middles[::step], ticktext=numbers[::step],
                title_text=f"{words.lane} holding each slice of {words.batch} {FIRST} (colour: {words.lane})")


def _hatch_cells(fig: go.Figure, table: pd.DataFrame, batches: int, *, with_ids: bool) -> None:
    """A diagonal stroke across each cell of devices 8-15: a heatmap has no hatch, and their colours
    need the second cue their bars get from device_pattern. Over a written row id the stroke is a
    short one in the cell's upper part, clear of the number."""
    part = table[[bool(device_pattern(d)) if d >= 0 else False for d in table["device"]]]
    if part.empty:
        return
    y, size = part["batch"].to_numpy() + FIRST, 12.0
    if with_ids:  # a batch's row is about a panel's height over the batches; the id sits in its middle
        row_px = (HEIGHT - BASE_TOP_PX - MARGIN["b"]) * (1 - SPACING) / 2 / max(batches, 1)
        size = max(4.0, min(10.0, row_px * 0.3))
        y = y - 0.3
    fig.add_trace(go.Scatter(
        x=part["position"].to_numpy(), y=y, mode="markers", hoverinfo="skip", showlegend=False,
        name="devices 8-15 (hatched)",
        marker=dict(symbol="line-ne", size=size, line=dict(width=1.5, color=with_alpha("#FFFFFF", 0.6))),
    ), row=2, col=1)


def id_size(table: pd.DataFrame) -> float | None:
    """The row ids' type size: the widest id fits its cell on the narrowest chart (the xgap and a
    spare: 1 px a side), at most ID_SIZE; None when that is under MIN_ID_SIZE (the ids would run together)."""
    width = int(table["position"].max()) + 1
    cell_px = (NARROWEST_PX - MARGIN["l"] - MARGIN["r"]) / width - 2
    widest = max(text_px(str(int(table["sample"].max())), 1), 0.01)
    size = min(ID_SIZE, int(cell_px / widest * 2) / 2)
    return size if size >= MIN_ID_SIZE else None


def _cell_ids(fig: go.Figure, table: pd.DataFrame, size: float) -> None:
    """The dataset row ids written into the cells, each dark or white for contrast with its GPU's
    colour (a heatmap's text has one colour for all cells; a text trace has one per cell). Sized to
    its cells: presentation() leaves it so (CELL_TEXT)."""
    fig.add_trace(go.Scatter(
        x=table["position"].to_numpy(), y=table["batch"].to_numpy() + FIRST, mode="text", text=table["sample"].astype(str),
        textfont=dict(size=size, color=[text_color_on(device_color(d) if d >= 0 else IDLE_GREY) for d in table["device"]]),
        hoverinfo="skip", showlegend=False, name="dataset row ids", meta=CELL_TEXT,
    ), row=2, col=1)


def _edges(count: int, bins: int) -> np.ndarray:
    return np.unique(np.linspace(0, count, min(bins, count) + 1).round().astype(np.int64))


def _batch_edges(batches: int) -> np.ndarray:
    # The last batch gets a bin of its own: it is the one whose split differs.
    return np.append(_edges(batches - 1, BATCH_BINS - 1), batches) if batches > 1 else _edges(batches, 1)


def _batch_labels(batch_edges: np.ndarray) -> list[str]:
    return [f"{a + FIRST:,}-{b - 1 + FIRST:,}" if b - a > 1 else f"{a + FIRST:,}" for a, b in zip(batch_edges[:-1], batch_edges[1:])]


def _binned_top(fig: go.Figure, table: pd.DataFrame, data_rows: int, batches: int) -> tuple[int, int]:
    row_edges = _edges(data_rows, ROW_BINS)
    batch_edges = _batch_edges(batches)
    counts, _, _ = np.histogram2d(table["batch"], table["sample"], bins=[batch_edges, row_edges])
    row_mid = (row_edges[:-1] + row_edges[1:]) / 2
    top = max(float(counts.max()), 1.0)
    some = 0.5 / top  # a count under a half is none: clear
    fig.add_trace(go.Heatmap(
        z=counts, x=row_mid, y=_batch_labels(batch_edges), zmin=0, zmax=top,
        colorscale=[[0, CLEAR], [some, CLEAR], [some, COUNT_LOW], [1, COUNT_HIGH]],
        colorbar=dict(title=dict(text="dataset<br>rows in<br>a cell", side="top"), len=0.4, y=1.0, yanchor="top",
                      x=1.01, thickness=14),
        hovertemplate="dataset rows near %{x:,.0f}, batches %{y}: %{z:,} rows<extra></extra>",
    ), row=1, col=1)
    return len(row_edges) - 1, len(batch_edges) - 1


def _binned_bottom(fig: go.Figure, table: pd.DataFrame, devices: int, batches: int, words: MapWords = DP_WORDS) -> None:
    # Each batch bin drawn as its first batch, cut into position bins, coloured by the GPU that holds
    # the middle row of each bin.
    batch_edges = _batch_edges(batches)
    width = int(table["position"].max()) + 1
    pos_edges = _edges(width, ROW_BINS)
    pos_mid = ((pos_edges[:-1] + pos_edges[1:]) // 2).astype(np.int64)
    by_slot = table.set_index(["batch", "position"])["device"]
    grid = np.full((len(batch_edges) - 1, len(pos_mid)), np.nan)
    for i, first in enumerate(batch_edges[:-1]):
        keys = pd.MultiIndex.from_arrays([np.full(len(pos_mid), first), pos_mid])
        grid[i] = by_slot.reindex(keys).to_numpy(dtype=float)
    fig.add_trace(go.Heatmap(
        z=grid, x=pos_mid, y=_batch_labels(batch_edges), colorscale=device_colorscale(devices), zmin=-1.5,
        zmax=devices - 0.5, showscale=False, hoverongaps=False,
        hovertemplate=f"{words.batches} %{{y}}, rows near %{{x:,}} of the {words.batch} → {words.lane} %{{z}}<extra></extra>",
    ), row=2, col=1)


def _device_legend(fig: go.Figure, devices: int, words: MapWords = DP_WORDS) -> None:
    """Legend entries for the device colours when no top-panel marker carries them."""
    for d in range(devices):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=words.name(d),
                                 marker=dict(color=device_color(d), symbol=device_symbol(d), size=12)), row=2, col=1)


SPACING = 0.18  # about what spacing() gives: for the height of a batch's row of cells


def spacing(bottom_title: str) -> float:
    """Room between the panels, as a share of the plot's height: the top panel's ticks and axis title,
    then the bottom panel's title as wrapped on the narrowest chart, and a gap between them."""
    lines = line_count(wrap(bottom_title, FONT_SIZE, NARROWEST_PX - MARGIN["l"] - MARGIN["r"] + 10))
    px = (TICK_SIZE + AXIS_TITLE_SIZE) * LINE_EM + 16 + lines * FONT_SIZE * LINE_EM + 24
    return px / (HEIGHT - BASE_TOP_PX - MARGIN["b"])


def exact_marks(table: pd.DataFrame) -> int:
    """Marks of the unbinned map: a point per dataset row plus a cell per (batch, row of the longest batch)."""
    if table.empty:
        return 0
    return len(table) + (int(table["batch"].max()) + 1) * (int(table["position"].max()) + 1)


def _cells(table: pd.DataFrame) -> int:
    return (int(table["batch"].max()) + 1) * (int(table["position"].max()) + 1)


def plot_sample_map(table: pd.DataFrame, *, devices: int, data_size: int, batches: int,
                    title: str, notes: list[str], words: MapWords = DP_WORDS) -> go.Figure:
    """Two panels: dataset row -> batch (coloured by GPU), and each batch's rows coloured by GPU.

    Each panel is exact or binned on its own: the top one bins as soon as its markers would be too
    small to tell apart without overlapping; the bottom one only past MAX_MARKS."""
    if table.empty:  # no forward recorded (a run that failed before its first): no row to place, an empty map
        fig = go.Figure()
        fig.add_annotation(text=wrap(f"No forward was recorded on any {words.lane}: there is no dataset row to place on "
                                     "the map.", FONT_SIZE, NARROWEST_PX - MARGIN["l"] - MARGIN["r"]),
                           x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=FONT_SIZE))
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        return styled(fig, title, notes, height=HEIGHT)
    data_rows = max(data_size, int(table["sample"].max()) + 1)
    top_exact = top_is_exact(table, data_size)
    # Binned, the top panel's cells and a legend entry per device (no marker carries the colours).
    top_marks = len(table) if top_exact else min(ROW_BINS, data_rows) * min(BATCH_BINS, batches) + devices
    bottom_exact = top_marks + _cells(table) <= MAX_MARKS
    with_ids = bottom_exact and _cells(table) <= TEXT_CELLS
    with_ids = with_ids and id_size(table) is not None
    top = (f"Where each dataset row went (colour: {words.lane})" if top_exact
           else "Where the dataset rows went (grey: how many rows fall in each cell)")
    bottom = words.bottom + (" (numbers: dataset rows)" if with_ids else "")
    if bottom_exact and not with_ids:  # too narrow for numbers a class can read: they are in the hover
        bottom += " (hover a cell: its dataset row)"
    fig = make_subplots(rows=2, cols=1, row_heights=[0.5, 0.5], vertical_spacing=spacing(bottom), subplot_titles=(top, bottom))
    if top_exact:
        _exact_top(fig, table, devices, data_rows, words)
        fig.update_xaxes(title_text="dataset row (index into the dataset)", row=1, col=1)
    else:
        row_bins, batch_bins = _binned_top(fig, table, data_rows, batches)
        why = "more rows than fit side by side" if exact_marks(table) <= MAX_MARKS else f"over {MAX_MARKS:,} marks"
        notes = notes + [f"top panel binned ({why}): {row_bins} × {batch_bins} cells, {plural(len(table), 'row')} in all"]
        fig.update_xaxes(title_text=f"dataset row (binned into {row_bins} ranges)", row=1, col=1)
    if bottom_exact:
        _exact_bottom(fig, table, devices, words)
        if not fig.layout.xaxis2.title.text:  # the slices' devices name the axis where they are its ticks
            fig.update_xaxes(title_text=words.bottom_x, row=2, col=1)
    else:
        _binned_bottom(fig, table, devices, batches, words)
        notes = notes + ["bottom panel binned too"]
        fig.update_xaxes(title_text=f"row within the {words.batch} (binned; colour: {words.lane} holding the bin's middle row)",
                         row=2, col=1)
    if not top_exact:
        _device_legend(fig, devices, words)
    for row, exact in ((1, top_exact), (2, bottom_exact)):
        if exact:
            # Whole batch numbers only, one tick per batch up to ~12 ticks, and no padding beyond them.
            fig.update_yaxes(title_text=words.batch, range=[batches - 0.5 + FIRST, FIRST - 0.5], tickmode="linear", tick0=FIRST,
                             dtick=max(1, -(-batches // 12)), tickformat=",d", row=row, col=1)
        else:  # bin labels like "0-25" would otherwise be read as dates
            fig.update_yaxes(title_text=f"{words.batches} (binned)", autorange="reversed", type="category", row=row, col=1)
    if len(words.epochs) > 1 and top_exact:
        _epoch_marks(fig, words.epochs)
    # The legend goes where styled() puts one, over the top panel's title; its colour bar (binned) keeps the right.
    fig.update_layout(legend=dict(itemsizing="constant"))
    styled(fig, title, notes, height=HEIGHT)
    if len(words.epochs) > 1 and top_exact:  # the epochs' names in the right margin, whole
        named = text_px(f"epoch {len(words.epochs)}", FONT_SIZE) + 12  # the widest: the most digits
        fig.update_layout(margin_r=max(fig.layout.margin.r or 0, math.ceil(named)))
    return fig



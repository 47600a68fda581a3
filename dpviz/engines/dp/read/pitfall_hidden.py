"""Pitfall figure for a tensor whose batch is not on DataParallel's dim (a GRU's h0): its shape, the cut
DataParallel made and the cut that was meant.

DataParallel cuts every tensor of the call on the same dim. h0 is (layers, batch, hidden), so on dim 0
it is cut along its layers: with one layer it makes one piece, and scatter zips the pieces of every
argument, keeping only as many replicas as the shortest list has. The top panel draws what happened
(the batch's rows across, each tensor's pieces in the colour of the GPU that got them, the rows no
replica got in grey), the bottom one the cut on h0's batch dim. All from the recorded pieces' shapes.
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.echo import plotly_text
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.trace import Trace
from dpviz.analysis.wording import counted, plural
from dpviz.engines.dp.read.pitfall_checks import misplaced, shows_hidden_cut
from dpviz.engines.dp.read.pitfall_layout import panel_headings, title_over_headings
from dpviz.figures.colors import IDLE_GREY, OUTLINE, device_color, device_pattern, text_color_on
from dpviz.figures.layout import styled
from dpviz.figures.trace_words import NAME_LIMIT, backend_note, device_name

DIM_NAMES = {"h0": ("layers", "batch", "hidden")}  # the hidden input form's h0, as nn.GRU takes it
COLUMNS = ["panel", "tensor", "device", "start", "stop", "shape", "text"]
DID, MEANT = "what DataParallel did", "what was meant"


def _dim_name(path: str, dim: int) -> str:
    names = DIM_NAMES.get(path)
    return f"dim {dim} ({names[dim]})" if names and dim < len(names) else f"dim {dim}"


def prepare_hidden(trace: Trace) -> pd.DataFrame | None:
    """Segments along the batch's rows: per panel and tensor, which GPU got rows start..stop (-1: none)."""
    found = misplaced(trace)
    if found is None:
        return None
    batch, path, got = found
    dim, rows, gpus = trace.dim, trace.batches[batch].rows, len(trace.lanes)
    shape = list(got[0].shape)
    shape[dim] = sum(a.shape[dim] for a in got)  # the whole tensor: its pieces laid end to end
    meant = next((d for d, n in enumerate(shape) if d != dim and n == rows), None)
    samples = [a for a in trace.arguments if a.batch == batch and a.mode == "split" and a.kind == "tensor"]
    batch_args = [p for p in dict.fromkeys(a.path for a in samples) if p != path]
    records = []
    for other in batch_args:  # the tensors cut right: their chunks in the replicas that got them
        first = 0
        for a in sorted((a for a in samples if a.path == other), key=lambda a: a.replica):
            n = a.shape[dim]
            records.append((DID, other, a.lane, first, first + n, a.shape, f"{device_name(a.lane)}: rows {first}-{first + n - 1}"))
            first += n
        if first < rows:
            records.append((DID, other, -1, first, rows, [], f"rows {first}-{rows - 1}: no replica"))
    failed = trace.failure.replica if trace.failure is not None and trace.failure.batch == batch else None
    start = 0
    for a in got:  # the misplaced tensor: each piece holds every row of the batch
        n = a.shape[dim]
        label = f"{path}[{start}:{start + n}]" if n != shape[dim] else path
        raised = ": ✗ raised" if a.replica == failed else ""  # where the replica failed, on what it was handed
        records.append((DID, label, a.lane, 0, rows, a.shape, f"{device_name(a.lane)}: all {rows} rows{raised}"))
        start += n
    if meant is not None:
        for other in batch_args + [path]:
            first = 0
            for device, n in enumerate(chunk_sizes(rows, gpus)):
                piece = list(shape) if other == path else None
                if piece is not None:
                    piece[meant] = n
                records.append((MEANT, other, device, first, first + n, piece or [], f"{device_name(device)}: rows {first}-{first + n - 1}"))
                first += n
    table = pd.DataFrame.from_records(records, columns=COLUMNS)
    table.attrs.update(batch=batch, path=path, shape=shape, meant=meant, replicas=len({a.replica for a in samples}))
    return table


def _bars(fig: go.Figure, part: pd.DataFrame, row: int) -> None:
    for r in part.itertuples():
        color = device_color(r.device) if r.device >= 0 else IDLE_GREY
        fig.add_trace(go.Bar(
            y=[plotly_text(r.tensor, NAME_LIMIT)], x=[r.stop - r.start], base=[r.start], orientation="h", showlegend=False,
            marker=dict(color=color, line=dict(color=OUTLINE, width=0.6),
                        pattern=dict(fillmode="overlay", shape=device_pattern(r.device) if r.device >= 0 else "", fgcolor=text_color_on(color))),
            text=[r.text], textposition="inside", insidetextanchor="middle", textangle=0,
            insidetextfont=dict(color=text_color_on(color)),
            hovertemplate=(f"{plotly_text(r.tensor, NAME_LIMIT)}: {r.text}"
                           + (f" (a piece of {' × '.join(map(str, r.shape))})" if r.shape else "") + "<extra></extra>"),
        ), row=row, col=1)


def plot_hidden(table: pd.DataFrame, *, title: str, notes: list[str], headings: list[str]) -> go.Figure:
    """Two panels over the batch's rows: the pieces as cut, and as meant."""
    panels = [p for p in (DID, MEANT) if (table["panel"] == p).any()]
    fig = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.25)
    for row, panel in enumerate(panels, start=1):
        _bars(fig, table[table["panel"] == panel], row)
        fig.update_yaxes(type="category", autorange="reversed", row=row, col=1)
    rows = int(table["stop"].max())
    fig.update_xaxes(range=[0, rows], showticklabels=True)
    fig.update_xaxes(title_text="rows of the batch", row=len(panels), col=1)
    fig.update_layout(barmode="overlay", bargap=0.3, uniformtext=dict(minsize=10, mode="hide"))
    lines = table.groupby("panel")["tensor"].nunique()
    styled(fig, title, notes, height=160 + 110 * len(panels) + 50 * int(lines.sum()))
    panel_headings(fig, headings)
    title_over_headings(fig, headings)
    return fig


def hidden_dim_figure(trace: Trace) -> go.Figure | None:
    """h0's shape and DataParallel's cut on dim `dim` against the cut on its batch dim; None when every
    split tensor's pieces add up to the batch's rows."""
    if not shows_hidden_cut(trace):
        return None
    table = prepare_hidden(trace)
    if table is None:
        return None
    batch, path, shape, meant = (table.attrs[k] for k in ("batch", "path", "shape", "meant"))
    name, dim, gpus = plotly_text(path, NAME_LIMIT), trace.dim, len(trace.lanes)
    pieces = sum(1 for t in table.loc[table["panel"] == DID, "tensor"].unique() if t == path or t.startswith(f"{path}["))
    dims = " × ".join(str(n) for n in shape)
    title = (f"{name} ({dims}) cut on {_dim_name(path, dim)}:<br>"
             f"{plural(pieces, 'piece')}, so {plural(table.attrs['replicas'], 'replica')} for {gpus} GPUs")
    headings = [f"<b>What DataParallel did</b>: every tensor cut on dim {dim};<br>scatter keeps as many replicas as the fewest pieces"]
    if meant is not None:
        headings.append(f"<b>What was meant</b>: {name} cut on {_dim_name(path, meant)},<br>in step with the other inputs")
    said = f"batch {counted(batch)}"
    if trace.failure is not None and trace.failure.batch == batch:
        said += f" failed:<br>{plotly_text(trace.failure.original, 90)}"
    notes = [f"{said}<br>{backend_note(trace)}"]
    return plot_hidden(table, title=title, notes=notes, headings=headings)

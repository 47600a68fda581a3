"""Pitfall figure for a model whose forward returns a 0-dim loss: the losses gather returned, one per GPU,
their mean, and the loss over every row of the batch.

Each GPU's loss is a bar as wide as the rows its chunk held, so the loss over all rows is the bars'
area over the batch's width, while the mean of the gathered vector gives every bar one vote: a 2-row
chunk weighs like a 4-row one. Drawn from facts["losses"] (recorded for the first and the last batch).
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.trace import Trace
from dpviz.analysis.wording import counted, plural, sizes_text
from dpviz.engines.dp.read.pitfall_checks import shows_loss_bias
from dpviz.engines.dp.read.pitfall_layout import heading_px, panel_headings, title_over_headings
from dpviz.figures.colors import OUTLINE, device_color, device_pattern, text_color_on
from dpviz.figures.layout import styled
from dpviz.figures.legends import legend_under_plot
from dpviz.figures.trace_words import backend_note, device_name

COLUMNS = ["batch", "replica", "device", "first_row", "rows", "loss"]
MEANS = ["batch", "rows", "mean_of_gathered", "row_weighted", "whole"]
# The means are lines across the bars. A mid grey reads on the light and the dark page (3.9:1, 4.8:1) but not on
# every bar (1.1:1 on GPU 2's green), so it runs on a black casing: black has 3.4:1 or more against each of the
# sixteen device colours, and the grey 5.3:1 against black. Casing and line share one dash pattern, in pixels.
MEAN_LINE, MEAN_CASING = "#808080", "#000000"
LINE_PX, CASING_PX = 3, 8
DASHES = {"dash": "9px,6px", "solid": "solid"}
AXIS_ROOM_PX = 64  # under a panel: its ticks and its axis title (then the legend, or the next panel's heading)
PANEL_PX = 140  # a panel's plot: both panels on a projector's first screen, under the banner and the tabs


def prepare_losses(trace: Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (sampled batch, replica): its chunk's rows and the loss it returned; and one row per
    sampled batch: the mean of the gathered vector, the row-weighted mean and the whole batch's loss."""
    records, means = [], []
    for sample in trace.facts.get("losses", []):
        batch, gathered, rows = int(sample["batch"]), sample["gathered"], sample["chunk_rows"]
        lanes = {s.replica: s.lane for s in trace.replicas(batch)}
        first = 0
        for replica, (loss, n) in enumerate(zip(gathered, rows)):
            records.append((batch, replica, lanes.get(replica, replica), first, int(n), float(loss)))
            first += n
        total = sum(rows)
        means.append((batch, total, sum(gathered) / len(gathered),
                      sum(g * n for g, n in zip(gathered, rows)) / max(1, total), float(sample["whole"])))
    return pd.DataFrame.from_records(records, columns=COLUMNS), pd.DataFrame.from_records(means, columns=MEANS)


def _heading(m: pd.Series, chunks: list[int]) -> str:
    split = f"chunks of {sizes_text(chunks)} rows"
    if len(set(chunks)) == 1:
        return f"<b>Batch {counted(m.batch)}</b>, {split}:<br>equal chunks, so the two means agree (one line)"
    bias = (m.mean_of_gathered - m.whole) / m.whole * 100 if m.whole else 0.0
    # Short lines: each fits the narrowest chart (a longer first line ran past its right edge). Each line is named
    # here, by its dash, over its panel: the legend that names them too is under the fold on a projector.
    return (f"<b>Batch {counted(m.batch)}</b>, {split}:<br>the vector's mean (dashed) is {bias:+.0f}%<br>"
            f"off the batch's loss (solid): its {min(chunks)}-row<br>chunk counts as much as a {max(chunks)}-row one")


def _mean_line(fig: go.Figure, value: float, rows: int, name: str, dash: str, row: int) -> None:
    """One mean across a panel: its casing, then the line itself on it (one legend entry, hovered once)."""
    for width, color, hover in ((CASING_PX, MEAN_CASING, "skip"), (LINE_PX, MEAN_LINE, "all")):
        fig.add_trace(go.Scatter(
            x=[0, rows], y=[value, value], mode="lines", name=name, legendgroup=name,
            showlegend=row == 1 and hover == "all", line=dict(color=color, width=width, dash=DASHES[dash]),
            hoverinfo=hover, hovertemplate=f"{name}: {value:.4f}<extra></extra>" if hover == "all" else None,
        ), row=row, col=1)


def _mean_values(fig: go.Figure, values: list[float], row: int) -> None:
    """The means' values just past the panel's right edge: the higher one above its line and the lower one
    below its own, so two close means never write over each other."""
    axis = "" if row == 1 else row
    for value in values:
        anchor = "middle" if len(values) == 1 else "bottom" if value == max(values) else "top"
        fig.add_annotation(text=f"{value:.3f}", x=1, y=value, xref=f"x{axis} domain", yref=f"y{axis}", xanchor="left",
                           yanchor=anchor, xshift=4, showarrow=False)


def plot_losses(table: pd.DataFrame, means: pd.DataFrame, *, title: str, notes: list[str]) -> go.Figure:
    """One panel per sampled batch: a bar per GPU as wide as its chunk, and the two means as lines across."""
    panels = len(means)
    headings = [_heading(m, table.loc[table["batch"] == m.batch, "rows"].tolist()) for m in means.itertuples()]
    # Between two panels: the upper one's ticks and axis title, then the lower one's heading, as many lines as it has.
    gap_px = AXIS_ROOM_PX + heading_px(headings[1:])
    plot_px = panels * PANEL_PX + (panels - 1) * gap_px
    fig = make_subplots(rows=panels, cols=1, vertical_spacing=gap_px / plot_px)
    shown = set()
    for row, m in enumerate(means.itertuples(), start=1):
        part = table[table["batch"] == m.batch]
        for r in part.itertuples():
            color = device_color(r.device)
            fig.add_trace(go.Bar(
                x=[r.first_row + r.rows / 2], y=[r.loss], width=[r.rows], name=device_name(r.device),
                legendgroup=device_name(r.device), showlegend=device_name(r.device) not in shown,
                marker=dict(color=color, line=dict(color=OUTLINE, width=0.6),
                            pattern=dict(fillmode="overlay", shape=device_pattern(r.device), fgcolor=text_color_on(color))),
                # Each bar's value at its foot: the means cross the bars near their tops.
                text=[f"{r.loss:.3f}"], textposition="inside", insidetextanchor="start", textangle=0,
                insidetextfont=dict(color=text_color_on(color)),
                hovertemplate=(f"{device_name(r.device)} (replica {r.replica}): loss {r.loss:.4f} over "
                               f"{plural(r.rows, 'row')}<extra></extra>"),
            ), row=row, col=1)
            shown.add(device_name(r.device))
        apart = abs(m.mean_of_gathered - m.whole) > 0.02 * max(abs(m.whole), 1e-12)  # else one number for both
        for value, name, dash in ((m.mean_of_gathered, "mean of the gathered vector (every GPU one vote)", "dash"),
                                  (m.whole, "loss over all rows (what one device computes)", "solid")):
            _mean_line(fig, value, m.rows, name, dash, row)
        _mean_values(fig, [m.mean_of_gathered, m.whole] if apart else [m.whole], row)
        fig.update_xaxes(range=[0, m.rows], title_text=f"rows of batch {counted(m.batch)}", row=row, col=1)
        top = max(part["loss"].max(), m.whole, m.mean_of_gathered) * 1.15
        fig.update_yaxes(range=[0, top], title_text="loss", row=row, col=1)
    # horizontal, placed by legend_under_plot below: styled() keeps no room for it over the plot
    fig.update_layout(barmode="overlay", bargap=0, uniformtext=dict(minsize=10, mode="hide"), legend_orientation="h")
    styled(fig, title, notes)
    fig.update_layout(margin=dict(r=70, b=AXIS_ROOM_PX))  # the means' values are written past the batch's end
    panel_headings(fig, headings)
    title_over_headings(fig, headings)
    fig.update_layout(height=fig.layout.margin.t + plot_px + fig.layout.margin.b)  # the panels keep their pixels
    # The legend in rows under the bottom panel's axis title, on the paper: Presenting then grows its gap and rows
    # with the type, and hangs the notes under it (a legend pinned to the chart's foot had the notes written over it).
    return legend_under_plot(fig, [t.name for t in fig.data if t.showlegend], AXIS_ROOM_PX)


def loss_bias_figure(trace: Trace) -> go.Figure | None:
    """The losses gather returned per GPU, their mean and the loss over all rows; None when forward
    returned no 0-dim loss (no facts["losses"])."""
    if not shows_loss_bias(trace):
        return None
    table, means = prepare_losses(trace)
    title = "Each GPU returned its own loss:<br>their mean is not the batch's loss"
    notes = [f"a bar is as wide as its chunk's rows<br>{backend_note(trace)}"]
    return plot_losses(table, means, title=title, notes=notes)

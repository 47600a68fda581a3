"""Pitfall figure for a model that changes its own state in forward: what each GPU's replicas counted,
what the wrapped model kept, and what one device would have counted.

Replicas are made anew for every batch. `self.calls += 1` rebinds an attribute of the replica, thrown
away after the batch, so the model keeps none of it; `self.rows_seen += n` adds in place to a buffer,
and only replica 0's buffer shares the model's storage, so the model keeps GPU 0's rows. The replicas'
counts come from the forward spans (one call and a chunk's rows per batch); the model's and one
device's from facts["state"].
"""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.trace import Trace
from dpviz.analysis.wording import plural
from dpviz.engines.dp.read.pitfall_checks import shows_state_lost
from dpviz.engines.dp.read.pitfall_layout import panel_headings, title_over_headings
from dpviz.figures.colors import OUTLINE, device_color, device_pattern, text_color_on
from dpviz.figures.layout import styled
from dpviz.figures.trace_words import backend_note, device_name

COLUMNS = ["label", "kind", "device", "calls", "rows_seen"]
KEPT, ONE = "#6B6B6B", "#9A9A9A"  # neutral greys, apart from idle grey, for the model and one device
HEADINGS = {"calls": "<b>calls</b>: self.calls += 1 rebinds<br>an attribute of the replica, thrown away",
            "rows_seen": "<b>rows_seen</b>: a buffer, += in place; only<br>GPU 0's replica shares the model's"}
KIND_WORDS = {"replicas": "counted by its replicas, then thrown away", "kept": "what the model holds after the run",
              "one device": "what the model would hold on one device"}


def prepare_state(trace: Trace) -> pd.DataFrame:
    """One row per GPU (its replicas' calls and rows over the run), then the model's and one device's."""
    calls = {lane.id: 0 for lane in trace.lanes}
    rows = dict(calls)
    for span in trace.spans:
        if span.phase == "forward" and span.lane is not None and span.order is not None:  # bodies that ran
            calls[span.lane] += 1
            rows[span.lane] += span.rows
    state = trace.facts["state"]
    records = [(f"{device_name(d)}'s replicas", "replicas", d, calls[d], rows[d]) for d in calls]
    records.append(("the model, after", "kept", -1, int(state["calls"][0]), int(state["rows_seen"][0])))
    records.append(("on one device", "one device", -1, int(state["calls"][1]), int(state["rows_seen"][1])))
    return pd.DataFrame.from_records(records, columns=COLUMNS)


def _fill(kind: str, device: int) -> tuple[str, str]:
    if kind == "replicas":
        return device_color(device), device_pattern(device)
    return (KEPT, "") if kind == "kept" else (ONE, ".")


def plot_state(table: pd.DataFrame, *, title: str, notes: list[str]) -> go.Figure:
    """Two panels of horizontal bars, calls over rows_seen, one bar per GPU then the model and one device."""
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.3)
    for row, (column, heading) in enumerate(HEADINGS.items(), start=1):
        for r in table.itertuples():
            color, pattern = _fill(r.kind, r.device)
            value = getattr(r, column)
            fig.add_trace(go.Bar(
                y=[r.label], x=[value], orientation="h", showlegend=False,
                marker=dict(color=color, line=dict(color=OUTLINE, width=0.6),
                            pattern=dict(fillmode="overlay", shape=pattern, fgcolor=text_color_on(color))),
                # Beside the bar, where a 0 shows too; on the page's background it takes the page's colour.
                text=[f"{value:,}"], textposition="outside", textangle=0, cliponaxis=False,
                hovertemplate=f"{r.label}: {column} = {value:,} ({KIND_WORDS[r.kind]})<extra></extra>",
            ), row=row, col=1)
        top = max(1, int(table[column].max()))
        fig.update_xaxes(range=[0, top * 1.25], row=row, col=1)
        # every row named (dtick 1): plotly's own spacing drops names of rows it finds close, the lesson's among them
        fig.update_yaxes(type="category", autorange="reversed", dtick=1, row=row, col=1)
    fig.update_layout(barmode="overlay", bargap=0.25)
    styled(fig, title, notes, height=260 + 2 * 34 * len(table))
    panel_headings(fig, list(HEADINGS.values()))
    title_over_headings(fig, list(HEADINGS.values()))
    return fig


def state_figure(trace: Trace) -> go.Figure | None:
    """Counters per GPU against the model's and one device's; None without facts["state"] or on one
    device (DataParallel then calls the model itself, and its state keeps)."""
    if not shows_state_lost(trace):
        return None
    table = prepare_state(trace)
    kept = table[table["kind"] == "kept"].iloc[0]
    one = table[table["kind"] == "one device"].iloc[0]
    title = "State set in forward is lost"
    notes = [f"after {plural(int(one.calls), 'batch')}: calls = {kept.calls:,}, rows_seen = {kept.rows_seen:,};<br>"
             f"one device would hold {one.calls:,} and {one.rows_seen:,}<br>{backend_note(trace)}"]
    return plot_state(table, title=title, notes=notes)

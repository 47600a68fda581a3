"""DataParallel's Split per batch: rows per device in every batch, and the devices left idle."""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.analysis.batch_facts import called_without_rows
from dpviz.trace import Trace
from dpviz.figures.bounds import MAX_MARKS
from dpviz.analysis.wording import plural
from dpviz.figures.trace_words import backend_note
from dpviz.figures.split import plot_split
from dpviz.figures.split import prepare_split


def split_dp_figure(trace: Trace) -> go.Figure:
    """Rows per device for every batch (stacked bars) and which devices sat idle (grey grid)."""
    table = prepare_split(trace)
    total = len(trace.batches)
    bars = int(table["bar"].nunique())
    shown = int(table.drop_duplicates("bar")["batches"].sum())
    grouped = bars < shown
    devices = len(trace.lanes)
    # The whole run, even if bars are cut: slots with no replica, and replicas called with no rows.
    forwards = [s for s in trace.spans if s.phase == "forward" and s.lane is not None]
    empty = sum(1 for s in forwards if called_without_rows(s))
    idle = devices * total - len(forwards)
    lane = trace.vocabulary.lane_noun
    # In the key figures' words: a turn is one GPU in one batch.
    title = f"Rows per {lane} in each of {plural(total, 'batch')}"
    title += f" ({lane} turns left idle: {idle:,} of {devices * total:,})" if idle else f" (no {lane} turn left idle)"
    notes = [backend_note(trace)]
    if empty:
        notes.append(f"{plural(empty, 'replica')} called with no rows")
    if grouped:
        notes.append(f"{plural(shown, 'batch')} in {plural(bars, 'bar')}: consecutive batches with the same split share one bar")
    if shown < total:
        notes.append(f"first {plural(shown, 'batch')} of {total:,} shown (at most {MAX_MARKS:,} marks)")
    x_title = "batches (a range shares one bar)" if grouped else "batch"
    return plot_split(table, devices=devices, title=title, notes=notes, x_title=x_title)

"""The timeline's step panel: DataParallel's steps for a batch, in order, one equal slot each.

Per batch: scatter (a chunk copied to each device), replicate (the model copied to each), the
replicas' forwards side by side in one slot (they run in parallel on real GPUs), gather (outputs
copied back), and in training the loss, each replica's backward side by side, the sum of their
gradients on GPU 0 and the step. No measured time: the panel says what happens in which order, the
measured panel below says how long it took. A forward's or backward's bar is as long as its share of
rows (the largest chunk fills its slot), so the short last batch reads short.

Every batch repeats the same steps, so the panel shows the first few of the window (STEP_SLOTS slots
at most) and the window's last batch when it splits differently.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.analysis.wording import counted
from dpviz.trace.vocabulary import EVERY_LANE, HOST, Vocabulary
from dpviz.figures.timeline_look import GUIDE, IDLE, draw_order, drawn_phases, phase_bars, phase_hover

STEPS_COLUMNS = ["device", "phase", "batch", "slot", "x0", "x1", "rows", "first_row"]
SLOT_COLUMNS = ["batch", "phase", "slot", "x0", "x1"]
# Slots the panel shows at most (the window's last batch may add its own): with the gaps between batches, a
# slot keeps about 18 px of the narrowest chart's 324 px of plot, room for an upright name (timeline.name_slots).
STEP_SLOTS = 12
FILL = 0.84  # the share of its slot a bar fills: the gap between slots separates the steps
BATCH_GAP = 0.5  # slots between two consecutive batches
SKIP_GAP = 1.4  # slots between two batches with others (not shown) between them


def batch_phases(trace: Trace, batch: int) -> list[str]:
    """The drawn phases this batch went through, in DataParallel's order (training's only when training)."""
    present = {s.phase for s in trace.spans_of(batch)}
    return [p for p in drawn_phases(trace.vocabulary) if p in present]


def step_batches(trace: Trace, first: int, last: int) -> list[int]:
    """The batches the panel shows: consecutive from `first` while they fit in STEP_SLOTS slots, and
    the window's `last` too when it split differently from `first` (the short last batch)."""
    slots = max(1, len(batch_phases(trace, first)))
    shown = list(range(first, min(last, first + max(1, STEP_SLOTS // slots) - 1) + 1))
    if shown[-1] != last and _split(trace, last) != _split(trace, first):
        shown.append(last)
    return shown


def _split(trace: Trace, batch: int) -> list[int]:
    return [s.rows for s in trace.replicas(batch)]


def prepare_steps(trace: Trace, batches: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(bars, slots): one row per drawn bar, with its slot's x0 and x1 in slot units, and one row per
    slot (batch, phase, x0, x1). Idle lanes get a band over their batch's slots."""
    bars, slots = [], []
    biggest = max((s.rows for b in batches for s in trace.replicas(b)), default=1) or 1
    x, previous = 0.0, None
    vocabulary = trace.vocabulary
    for batch in batches:
        if previous is not None:
            x += BATCH_GAP if batch == previous + 1 else SKIP_GAP
        begin, previous = x, batch
        replicas = trace.replicas(batch)
        for slot, phase in enumerate(batch_phases(trace, batch)):
            where = vocabulary.phase(phase).where
            slots.append((batch, phase, slot, x, x + 1))
            if where == HOST:  # a copy to or from every device with a replica
                spans = [(s.lane, s.rows, s.row_offset, FILL) for s in replicas]
            elif where == EVERY_LANE:
                spans = [(s.lane, s.rows, s.row_offset, FILL * s.rows / biggest)
                         for s in trace.spans_of(batch, phase) if s.lane is not None]
            else:
                spans = [(s.lane, s.rows, s.row_offset if s.rows else -1, FILL)
                         for s in trace.spans_of(batch, phase) if s.lane is not None]
            left = x + (1 - FILL) / 2
            bars += [(lane, phase, batch, slot, left, left + max(length, 0.08), rows, first_row)
                     for lane, rows, first_row, length in spans]
            x += 1
        used = {s.lane for s in replicas}
        bars += [(lane.id, IDLE, batch, -1, begin, x, 0, -1) for lane in trace.lanes if lane.id not in used]
    return (pd.DataFrame.from_records(bars, columns=STEPS_COLUMNS),
            pd.DataFrame.from_records(slots, columns=SLOT_COLUMNS))


def slot_label(vocabulary: Vocabulary, phase: str) -> str:
    """The slot's name under the panel: the legend's label without its hatch hint ("backward (×)" -> "backward")."""
    return vocabulary.phase(phase).label.split(" (")[0]


def add_steps(fig: go.Figure, bars: pd.DataFrame, slots: pd.DataFrame, vocabulary: Vocabulary,
              axes: tuple[str, str]) -> None:
    """The step panel's bars, slot names under it, batch labels above it and a divider between batches."""
    x, y = axes
    for phase in draw_order(vocabulary, set(bars["phase"])):
        part = bars[bars["phase"] == phase]
        # the batch again, counted from 1 as every label reads it (customdata[0] stays the trace's index)
        customdata = np.column_stack([part["batch"], part["rows"], part["first_row"], part["slot"] + 1, part["batch"] + 1])
        hover = phase_hover(vocabulary, phase, "idle, no rows of batch %{customdata[4]:,}")
        if phase != IDLE:
            hover = f"batch %{{customdata[4]:,}}, step %{{customdata[3]}}<br>{hover}"
        fig.add_trace(phase_bars(vocabulary, phase, part["device"].to_numpy(), part["x0"].to_numpy(),
                                 (part["x1"] - part["x0"]).to_numpy(), customdata=customdata, hover=hover, axes=(x, y)))
    batches = slots.groupby("batch", sort=False).agg(x0=("x0", "min"), x1=("x1", "max")).reset_index()
    for i, r in enumerate(batches.itertuples()):
        fig.add_annotation(text=f"batch {counted(r.batch)}", x=(r.x0 + r.x1) / 2, xref=x, y=1, yref=f"{y} domain",
                           yanchor="bottom", yshift=2, showarrow=False, font=dict(size=13), name=f"batch {r.batch}")
        if i:
            before = batches.iloc[i - 1]
            middle = (before.x1 + r.x0) / 2
            fig.add_shape(type="line", xref=x, yref=f"{y} domain", x0=middle, x1=middle, y0=0, y1=1,
                          line=dict(color=GUIDE, width=1.5, dash="dot"), layer="below", name=f"batch {r.batch} starts")
            if r.batch != before.batch + 1:  # batches in between are not shown: they repeat the same steps
                fig.add_annotation(text="⋯", x=middle, xref=x, y=0.5, yref=f"{y} domain", showarrow=False,
                                   font=dict(size=18), bgcolor="rgba(128,128,128,0.25)", name="skipped")
    fig.update_layout({f"xaxis{x[1:]}": dict(
        tickmode="array", tickvals=((slots["x0"] + slots["x1"]) / 2).tolist(), showgrid=False,
        ticktext=[slot_label(vocabulary, p) for p in slots["phase"]], zeroline=False,
        range=[float(slots["x0"].min()) - 0.15, float(slots["x1"].max()) + 0.15], autorange=False,
    )})

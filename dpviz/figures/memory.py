"""Memory: bytes on each device after each phase of one sampled batch, and why device 0 carries more.

Bars are grouped by phase, one bar per device in each group, so device 0's bar stands above the
others' in every group. On simulated devices the bars are stacked by the kind of tensor (computed
from tensor sizes by dpviz.memory): the kinds only device 0 holds (parameters, their gradients, the
optimizer state) sit at the bottom, where the other bars have nothing. On real GPUs a bar is what
torch.cuda.memory_allocated reported, in the device's colour. Memory is sampled for the first and
the last batch; the last may split differently.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..memory import MEASURED
from ..summary import human_bytes, memory_batches, memory_table, memory_totals
from ..trace import Trace
from .colors import MEMORY_COLORS, OUTLINE, device_color
from .style import backend_note, device_name, styled

# Bottom to top: what only device 0 holds first, then data, then what every replica holds.
STACK_ORDER = (
    "parameters", "gradients", "optimizer state", "output and loss", "batch and chunks",
    "parameter copies", "activations", "backward buffers",
)
KIND_LABELS = {
    "computed": "computed from tensor sizes (simulated devices)",
    "measured": "measured: torch.cuda.memory_allocated",
}
MORE_WORDS = {  # why device 0 holds more of a kind every device has
    "batch and chunks": "batch and chunks (the whole batch, not one chunk)",
    "backward buffers": "backward buffers (the whole output gradient)",
}
NAMED_SLOTS = 16  # up to this many bars the axis says "GPU 3"; past it, just "3"
TEXT_SLOTS = 40  # totals are written above the bars up to this many bars


def _check_memory_batch(trace: Trace, batch: int | None) -> int:
    sampled = memory_batches(trace)
    if not sampled:
        raise ValueError("this trace has no memory samples (it was recorded before dpviz measured memory)")
    if batch is None:
        return sampled[0]
    if isinstance(batch, bool) or batch not in sampled:
        names = " and ".join(f"{b:,}" for b in sampled)
        raise ValueError(f"memory was sampled for {'batches' if len(sampled) > 1 else 'batch'} {names} only, got {batch!r}")
    return batch


def prepare_memory(trace: Trace, batch: int | None = None) -> pd.DataFrame:
    """One row per (phase, device, category) with bytes held after that phase of `batch` (default: the
    first sampled batch), in pipeline order; `total` is the device's sum after the phase. A device that
    held nothing gets one row of category "" and 0 bytes, so every (phase, device) slot is present."""
    batch = _check_memory_batch(trace, batch)
    table = memory_table(trace)
    table = table[table["batch"] == batch]
    totals = memory_totals(trace)
    totals = totals[totals["batch"] == batch].rename(columns={"bytes": "total"})
    empty = totals[totals["total"] == 0].assign(category="", bytes=0)
    table = pd.concat([table, empty.drop(columns="total")], ignore_index=True)
    table = table.merge(totals[["phase", "device", "total"]], on=["phase", "device"], how="left")
    stack = {c: i for i, c in enumerate(STACK_ORDER + (MEASURED, ""))}
    table["stack_index"] = [stack.get(c, len(stack)) for c in table["category"]]
    table = table.sort_values(["step_index", "device", "stack_index"], kind="stable").reset_index(drop=True)
    return table[["batch", "phase", "step_index", "device", "category", "bytes", "total"]]


def _byte_ticks(top: float) -> tuple[list[float], list[str]]:
    """About five round ticks from 0 to `top` bytes, labelled in one binary unit."""
    unit, name = 1, "B"
    for bigger, bigger_name in ((1024, "KiB"), (1024**2, "MiB"), (1024**3, "GiB")):
        if top >= bigger:
            unit, name = bigger, bigger_name
    raw = max(top / unit / 5, 1e-9)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if name == "B":
        step = max(1, round(step))
    ticks = [k * step for k in range(int(top / unit / step) + 2)]
    return [t * unit for t in ticks], [f"{t:,g} {name}" for t in ticks]


def plot_memory(table: pd.DataFrame, *, kind: str, title: str, notes: list[str], why: str | None) -> go.Figure:
    """Bars grouped by phase, one per device: stacked by category (computed) or one value (measured)."""
    slots = table.drop_duplicates(["step_index", "device"])
    devices = sorted(slots["device"].unique())
    named = len(slots) <= NAMED_SLOTS
    tick = {d: device_name(d) if named else str(d) for d in devices}

    def x_of(part: pd.DataFrame) -> list[list[str]]:
        return [list(part["phase"]), [tick[d] for d in part["device"]]]

    fig = go.Figure()
    hover = "%{customdata[0]} after %{customdata[1]}: %{customdata[2]}<extra>%{fullData.name}</extra>"
    if kind == "measured":
        part = table[table["category"] == MEASURED]
        fig.add_trace(go.Bar(
            x=x_of(part), y=part["bytes"].to_numpy(), name="memory_allocated", showlegend=False,
            marker=dict(color=[device_color(d) for d in part["device"]], line=dict(color=OUTLINE, width=0.6)),
            customdata=np.column_stack([[device_name(d) for d in part["device"]], part["phase"],
                                        [human_bytes(b) for b in part["bytes"]]]),
            hovertemplate=hover,
        ))
    else:
        for category in STACK_ORDER:
            part = table[(table["category"] == category) & (table["bytes"] > 0)]
            if part.empty:
                continue
            fig.add_trace(go.Bar(
                x=x_of(part), y=part["bytes"].to_numpy(), name=category,
                marker=dict(color=MEMORY_COLORS[category], line=dict(color=OUTLINE, width=0.6)),
                customdata=np.column_stack([[device_name(d) for d in part["device"]], part["phase"],
                                            [human_bytes(b) for b in part["bytes"]]]),
                hovertemplate=hover,
            ))
    # The totals: written above each bar while they fit, and the hover of an empty bar.
    fig.add_trace(go.Scatter(
        x=x_of(slots), y=slots["total"].to_numpy(), name="total", showlegend=False,
        mode="text" if len(slots) <= TEXT_SLOTS else "markers",
        text=[human_bytes(b) for b in slots["total"]], textposition="top center", textfont=dict(size=13),
        marker=dict(size=6, color="rgba(0,0,0,0)"),
        customdata=np.column_stack([[device_name(d) for d in slots["device"]], slots["phase"],
                                    [human_bytes(b) + " in all" for b in slots["total"]]]),
        hovertemplate=hover,
    ))
    top = float(slots["total"].max()) or 1.0
    tickvals, ticktext = _byte_ticks(top * 1.12)
    fig.update_yaxes(title_text="memory on the device", range=[0, top * 1.15], tickmode="array",
                     tickvals=tickvals, ticktext=ticktext)
    fig.update_xaxes(title_text="after each phase: one bar per GPU" + ("" if named else " (0, 1, 2, …)"),
                     tickson="boundaries", showdividers=True, dividercolor="#BBBBBB", tickangle=0,
                     tickfont=dict(size=13 if len(slots) <= 64 else 10))
    fig.update_layout(barmode="stack", bargap=0.2, hovermode="closest")
    if kind != "measured":  # the legend reads top to bottom like the stack
        fig.update_layout(legend=dict(traceorder="reversed", title=dict(text="kind of tensor")))
    styled(fig, title, notes, height=620 if why else 540)
    if why:  # a caption under the axis: over the bars it would hide one
        fig.add_annotation(text=why, x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="top",
                           yshift=-92, align="left", showarrow=False, font=dict(size=15))
        fig.update_layout(margin=dict(b=170))
    return fig


def _why(trace: Trace, table: pd.DataFrame) -> str | None:
    """Device 0's fullest moment of this batch against the largest other device then, and what it
    holds that the others don't (or holds more of) over the batch."""
    first = trace.lanes[0].id
    if len(trace.lanes) < 2 or table["total"].max() == 0:
        return None
    at = table.loc[table.loc[table["device"] == first, "total"].idxmax()]
    moment = table[table["phase"] == at["phase"]]
    others = moment[moment["device"] != first].groupby("device")["total"].first()
    most, who, mine = int(others.max()), int(others.idxmax()), int(at["total"])
    ratio = f"{mine / most:.1f}× the {human_bytes(most)} of {device_name(who)}" if most else f"{device_name(who)} holds nothing"
    text = f"<b>After {at['phase']}, {device_name(first)} holds {human_bytes(mine)}: {ratio}.</b>"
    if trace.memory_kind == "measured":
        return text + "<br>Measured: one total per device, not broken down by kind of tensor."
    peak = table[table["category"] != ""].groupby(["category", "device"])["bytes"].max().unstack(fill_value=0)
    alone, more = [], []
    for category in STACK_ORDER:
        if category not in peak.index or peak.loc[category].get(first, 0) == 0:
            continue
        rest = int(peak.loc[category].drop(first).max()) if len(peak.columns) > 1 else 0
        if rest == 0:
            alone.append(category)
        elif peak.loc[category, first] > rest:
            more.append(category)
    name = device_name(first)
    if alone:
        text += f"<br>Only {name} holds: {' · '.join(alone)}."
    if more:
        text += f"<br>{name} holds more: {' · '.join(MORE_WORDS.get(c, c) for c in more)}."
    return text


def memory_figure(trace: Trace, batch: int | None = None) -> go.Figure:
    """Memory per device after each phase of `batch` (default: the first sampled batch; the last batch
    is sampled too and may split differently), stacked by kind (computed) or as measured."""
    batch = _check_memory_batch(trace, batch)
    table = prepare_memory(trace, batch)
    kind = trace.memory_kind
    title = f"Memory per GPU after each phase of batch {batch:,} of {len(trace.batches):,}"
    first = trace.lanes[0].id
    mine = table.loc[table["device"] == first, "total"].max()
    if len(trace.lanes) > 1 and mine > table.loc[table["device"] != first, "total"].max():
        title += f": {device_name(first)} carries the most"
    notes = [KIND_LABELS.get(kind, kind), backend_note(trace)]
    sampled = memory_batches(trace)
    if len(sampled) > 1:
        notes.append(f"sampled: batches {' and '.join(f'{b:,}' for b in sampled)}")
    return plot_memory(table, kind=kind, title=title, notes=notes, why=_why(trace, table))

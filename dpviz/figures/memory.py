"""Memory: bytes on each device after each phase of one sampled batch, and why device 0 carries more.

Bars are grouped by phase, one bar per device in each group, so device 0's bar stands above the
others' in every group. On simulated devices the bars are stacked by the kind of tensor (computed
from tensor sizes by the engine's memory ledger): the kinds only device 0 holds (parameters, their gradients, the
optimizer state) sit at the bottom, where the other bars have nothing. On real GPUs a bar is what
torch.cuda.memory_allocated reported, in the device's colour. Memory is sampled for the first and
the last batch; the last may split differently.

Every amount is in one unit, the one the tallest bar fills (`byte_unit`), named once in the axis
title. Each bar's total is written on top of it, level or upright as the bars' width allows, or past
that only on device 0's bars; every bar's total is in its hover.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..tables import memory_batches, memory_table, memory_totals
from ..trace import Trace
from ..vocabulary import Vocabulary
from .colors import OUTLINE, device_color
from .style import backend_note, styled

KIND_LABELS = {
    "computed": "computed from tensor sizes (simulated devices)",
    "measured": "measured: torch.cuda.memory_allocated",
}
NAMED_SLOTS = 16  # up to this many bars the axis says "GPU 3"; past it, just "3"
# Writing the totals: the plot's width is the page's, so assume a narrow one (a 1,000 px chart less its
# legend); a wider page only adds room. Digits at LEVEL_FONT are about CHAR_PX wide.
PLOT_PX = 700
LEVEL_FONT, ROTATED_FONT, CHAR_PX = 13, 11, 8
ROTATED_PX = 10  # an upright number at ROTATED_FONT: its digits' height and a gap


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
    vocabulary = trace.vocabulary  # the stack's order, bottom to top, is the vocabulary's order of kinds
    stack = {c: i for i, c in enumerate(vocabulary.memory_names + (vocabulary.measured_memory, ""))}
    table["stack_index"] = [stack.get(c, len(stack)) for c in table["category"]]
    table = table.sort_values(["step_index", "device", "stack_index"], kind="stable").reset_index(drop=True)
    return table[["batch", "phase", "step_index", "device", "category", "bytes", "total"]]


@dataclass(frozen=True)
class ByteUnit:
    """The one unit a memory figure writes every amount in: ticks, totals, hovers and caption."""

    name: str  # "B", "KiB", "MiB" or "GiB"
    size: int  # bytes in one unit
    decimals: int  # enough for three significant digits at the figure's largest amount

    def number(self, n: float) -> str:
        """`n` bytes as a number in this unit, without the unit: "0.63"; "<0.01" for a sliver."""
        value = n / self.size
        text = f"{value:,.{self.decimals}f}"
        if n and float(text.replace(",", "")) == 0:
            return "<" + f"{10 ** -self.decimals:.{self.decimals}f}"
        return text

    def amount(self, n: float) -> str:
        """`n` bytes with this unit: "0.63 KiB"."""
        return f"{self.number(n)} {self.name}"


def byte_unit(top: float) -> ByteUnit:
    """The largest binary unit `top` bytes fill at least once, so the tallest bar reads 1 to 1,023."""
    name, size = "B", 1
    for bigger_name, bigger in (("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3)):
        if top >= bigger:
            name, size = bigger_name, bigger
    value = top / size
    decimals = 0 if size == 1 or value >= 100 else 1 if value >= 10 else 2
    return ByteUnit(name, size, decimals)


def _byte_ticks(top: float, unit: ByteUnit) -> tuple[list[float], list[str]]:
    """About five round ticks from 0 to `top` bytes, as numbers in `unit` (the axis title names it)."""
    raw = max(top / unit.size / 5, 1e-9)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if unit.size == 1:
        step = max(1, round(step))
    ticks = [k * step for k in range(int(top / unit.size / step) + 2)]
    return [t * unit.size for t in ticks], [f"{t:,g}" for t in ticks]


def total_labels(slots: pd.DataFrame, unit: ByteUnit, plot_px: float = PLOT_PX) -> tuple[list[str], int]:
    """The total written on each bar of `slots` and the angle to write it at, from the width a bar gets.

    Level while the widest number fits beside its neighbours, turned upright while a line of text does;
    past that, only device 0's bar in each phase (the one the figure is about) is written, every bar
    keeping its total in the hover. An empty bar gets no number: there is nothing to stand it on."""
    numbers = [unit.number(n) if n else "" for n in slots["total"]]
    slot_px = plot_px / max(1, len(slots))
    widest = max((len(t) for t in numbers), default=0) * CHAR_PX
    if widest + 4 <= slot_px:
        return numbers, 0
    if ROTATED_PX <= slot_px:
        return numbers, -90
    first = int(slots["device"].min())
    return [t if d == first else "" for t, d in zip(numbers, slots["device"])], -90


def _top_segments(table: pd.DataFrame) -> pd.Series:
    """Per (step_index, device), the category drawn highest in the stack: where its total is written."""
    filled = table[table["bytes"] > 0]
    return filled.groupby(["step_index", "device"])["category"].last()


def plot_memory(table: pd.DataFrame, *, vocabulary: Vocabulary, kind: str, title: str, notes: list[str], why: str | None,
                unit: ByteUnit) -> go.Figure:
    """Bars grouped by phase, one per device: stacked by category (computed) or one value (measured),
    each bar's total written on top of it in `unit` (see total_labels) and in every hover."""
    slots = table.drop_duplicates(["step_index", "device"])
    devices = sorted(slots["device"].unique())
    named = len(slots) <= NAMED_SLOTS
    tick = {d: vocabulary.lane_name(d) if named else str(d) for d in devices}
    labels, angle = total_labels(slots, unit)
    label_of = dict(zip(zip(slots["step_index"], slots["device"]), labels))
    top_of = _top_segments(table)

    def x_of(part: pd.DataFrame) -> list[list[str]]:
        return [list(part["phase"]), [tick[d] for d in part["device"]]]

    def bar(part: pd.DataFrame, **style) -> go.Bar:
        # Only the top segment of a stack carries the total: plotly writes "outside" text on the outermost bar.
        keys = list(zip(part["step_index"], part["device"]))
        text = [label_of[k] if top_of.get(k) == c else "" for k, c in zip(keys, part["category"])]
        return go.Bar(
            x=x_of(part), y=part["bytes"].to_numpy(), text=text, textposition="outside", textangle=angle,
            constraintext="none", cliponaxis=False, outsidetextfont=dict(size=ROTATED_FONT if angle else LEVEL_FONT),
            customdata=np.column_stack([[vocabulary.lane_name(d) for d in part["device"]], part["phase"],
                                        [unit.amount(b) for b in part["bytes"]], [unit.amount(b) for b in part["total"]]]),
            hovertemplate=hover, **style,
        )

    fig = go.Figure()
    hover = "%{customdata[0]} after %{customdata[1]}: %{customdata[2]} of %{customdata[3]}<extra>%{fullData.name}</extra>"
    if kind == "measured":
        part = table[table["category"] == vocabulary.measured_memory]
        fig.add_trace(bar(part, name="memory_allocated", showlegend=False,
                          marker=dict(color=[device_color(d) for d in part["device"]], line=dict(color=OUTLINE, width=0.6))))
    else:
        for category in vocabulary.memory_names:
            part = table[(table["category"] == category) & (table["bytes"] > 0)]
            if not part.empty:
                fig.add_trace(bar(part, name=category,
                                  marker=dict(color=vocabulary.memory_kind(category).color, line=dict(color=OUTLINE, width=0.6))))
    # Every bar's total, empty bars' too, in a hover at the bar's top.
    fig.add_trace(go.Scatter(
        x=x_of(slots), y=slots["total"].to_numpy(), name="total", showlegend=False, mode="markers",
        marker=dict(size=6, color="rgba(0,0,0,0)"),
        customdata=np.column_stack([[vocabulary.lane_name(d) for d in slots["device"]], slots["phase"],
                                    [unit.amount(b) + " in all" for b in slots["total"]]]),
        hovertemplate="%{customdata[0]} after %{customdata[1]}: %{customdata[2]}<extra>total</extra>",
    ))
    top = float(slots["total"].max()) or 1.0
    headroom = 1.28 if angle else 1.15  # an upright number needs more room above the tallest bar
    tickvals, ticktext = _byte_ticks(top * (headroom - 0.03), unit)
    fig.update_yaxes(title_text=f"memory on the {'device' if vocabulary.engine == 'dp' else vocabulary.lane_noun} ({unit.name})", range=[0, top * headroom], tickmode="array",
                     tickvals=tickvals, ticktext=ticktext)
    fig.update_xaxes(title_text=f"after each phase: one bar per {vocabulary.lane_noun}" + ("" if named else " (0, 1, 2, …)"),
                     tickson="boundaries", showdividers=True, dividercolor="#BBBBBB", tickangle=0,
                     tickfont=dict(size=13 if len(slots) <= 64 else 10))
    fig.update_layout(barmode="stack", bargap=0.2, hovermode="closest")
    if sum(map(bool, labels)) < int((slots["total"] > 0).sum()):
        # On a line of its own: the subtitle is already as long as a narrow chart is wide.
        notes = notes[:-1] + [f"{notes[-1]}<br>too many bars to write every total: "
                              f"{vocabulary.lane_name(int(slots['device'].min()))}'s are written, every bar's is in its hover"]
    if kind != "measured":  # the legend reads top to bottom like the stack
        fig.update_layout(legend=dict(traceorder="reversed", title=dict(text="kind of tensor")))
    styled(fig, title, notes, height=620 if why else 540)
    if "<br>" in notes[-1]:  # room for the subtitle's second line, the plot keeping its height
        fig.update_layout(height=fig.layout.height + 20, margin=dict(t=fig.layout.margin.t + 20))
    if why:  # a caption under the axis: over the bars it would hide one
        fig.add_annotation(text=why, x=0, y=0, xref="paper", yref="paper", xanchor="left", yanchor="top",
                           yshift=-92, align="left", showarrow=False, font=dict(size=15))
        fig.update_layout(margin=dict(b=170))
    return fig


def _why(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str | None:
    """Device 0's fullest moment of this batch against the largest other device then, and what it
    holds that the others don't (or holds more of) over the batch."""
    vocabulary = trace.vocabulary
    first = trace.lanes[0].id
    if len(trace.lanes) < 2 or table["total"].max() == 0:
        return None
    if trace.engine == "ddp":
        return _balanced(trace, table, unit)
    at = table.loc[table.loc[table["device"] == first, "total"].idxmax()]
    moment = table[table["phase"] == at["phase"]]
    others = moment[moment["device"] != first].groupby("device")["total"].first()
    most, who, mine = int(others.max()), int(others.idxmax()), int(at["total"])
    ratio = f"{mine / most:.1f}× the {unit.amount(most)} of {vocabulary.lane_name(who)}" if most else f"{vocabulary.lane_name(who)} holds nothing"
    text = f"<b>After {at['phase']}, {vocabulary.lane_name(first)} holds {unit.amount(mine)}: {ratio}.</b>"
    if trace.memory_kind == "measured":
        return text + "<br>Measured: one total per device, not broken down by kind of tensor."
    peak = table[table["category"] != ""].groupby(["category", "device"])["bytes"].max().unstack(fill_value=0)
    alone, more = [], []
    for category in vocabulary.memory_names:
        if category not in peak.index or peak.loc[category].get(first, 0) == 0:
            continue
        rest = int(peak.loc[category].drop(first).max()) if len(peak.columns) > 1 else 0
        if rest == 0:
            alone.append(category)
        elif peak.loc[category, first] > rest:
            more.append(category)
    name = vocabulary.lane_name(first)
    if alone:
        text += f"<br>Only {name} holds: {' · '.join(alone)}."
    if more:
        text += f"<br>{name} holds more: {' · '.join(vocabulary.memory_kind(c).more or c for c in more)}."
    return text


def _balanced(trace: Trace, table: pd.DataFrame, unit: ByteUnit) -> str:
    """DDP: every rank holds its own full copy of everything; say how even the ranks are at their fullest."""
    vocabulary = trace.vocabulary
    peaks = table.groupby("device")["total"].max()
    most, least = int(peaks.max()), int(peaks.min())
    at = table.loc[table["total"].idxmax()]
    lead = (f"<b>Balanced: at its fullest (after {at['phase']}) every {vocabulary.lane_noun} holds {unit.amount(most)}.</b>"
            if most == least else
            f"<b>At their fullest the {vocabulary.lane_noun}s hold {unit.amount(least)} to {unit.amount(most)}"
            f" ({vocabulary.lane_name(int(peaks.idxmax()))} the most).</b>")
    held = table[table["bytes"] > 0].groupby("category")["device"].nunique()
    everywhere = [c for c in vocabulary.memory_names if held.get(c, 0) == len(trace.lanes)]
    kept = f"Every {vocabulary.lane_noun} holds its own {', '.join(everywhere)}" if everywhere else ""
    return lead + (f"<br>{kept}:<br>no output is gathered onto one {vocabulary.lane_noun}, no gradient summed onto one."
                   if kept else "")


def memory_figure(trace: Trace, batch: int | None = None) -> go.Figure:
    """Memory per device after each phase of `batch` (default: the first sampled batch; the last batch
    is sampled too and may split differently), stacked by kind (computed) or as measured."""
    batch = _check_memory_batch(trace, batch)
    table = prepare_memory(trace, batch)
    kind = trace.memory_kind
    step = "step" if trace.engine == "ddp" else "batch"
    title = f"Memory per {trace.vocabulary.lane_noun} after each phase of {step} {batch:,} of {len(trace.batches):,}"
    first = trace.lanes[0].id
    mine = table.loc[table["device"] == first, "total"].max()
    if len(trace.lanes) > 1 and mine > table.loc[table["device"] != first, "total"].max():
        title += ": " + trace.vocabulary.word("carries_most", lane=trace.vocabulary.lane_name(first))
    label = KIND_LABELS.get(kind, kind)
    if trace.engine == "ddp" and kind == "computed":
        label = "computed from tensor sizes in each rank's process"
    notes = [label, backend_note(trace)]
    sampled = memory_batches(trace)
    if len(sampled) > 1:
        notes.append(f"sampled: {step}es {' and '.join(f'{b:,}' for b in sampled)}".replace("stepes", "steps"))
    unit = byte_unit(float(table["total"].max()))
    return plot_memory(table, vocabulary=trace.vocabulary, kind=kind, title=title, notes=notes,
                       why=_why(trace, table, unit), unit=unit)

"""Where the memory goes: the same settings under several engines, each device's memory by kind and the bytes
it moves per step, side by side.

Top: one stacked bar per device (a rank, or a simulated GPU), grouped by engine, every device read at the same
moment (the end of the last full step, after the optimizer's step; what a step makes and frees at its peak in it):
parameters, gradients, optimizer state, activations and communication buffers, from each engine's memory ledger
(dpviz.analysis.memory_compare). Bottom: per device, the bytes of the tensors it handed its collectives per step
(measured: what the rank code passed them), stacked by collective, and a diamond at the bytes it sends per step
by the textbook ring algorithms NCCL runs (computed; DataParallel's: its copies), the count a comparison's
Compare bars draw. Every amount, ticks and title alike, in one binary unit (dpviz.figures.byte_unit). Drawn from
plain lists: no pandas.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.memory_compare import COLLECTIVES, FAMILIES, bytes_per_step, memory_by_kind, moments as read_at, state_title
from dpviz.analysis.traffic import averaged
from dpviz.figures.byte_unit import ByteUnit, byte_unit
from dpviz.figures.colors import OUTLINE
from dpviz.figures.layout import styled
from dpviz.figures.legends import legend_under_plot
from dpviz.trace import Trace
from dpviz.trace.legend import KINDS

# One colour per family of kinds, whatever the engine calls its own kinds (a DDP bucket and FSDP's gathered
# parameters are both communication buffers): the process engines' ledger colours, apart from every device colour.
FAMILY_COLORS = {"parameters": "#7766BB", "gradients": "#AA4444", "optimizer state": "#CC9999",
                 "activations": "#33EEEE", "communication buffers": "#FF9966"}
OTHER_COLOR = "#BBBBBB"  # a GPU's measured figure, one amount with no kinds


def collective_look(collective: str) -> tuple[str, str]:
    """(colour, hatch) of a collective as the ranks wrote it down ("all-gather (backward)"): its kind's colour in the
    legend (dpviz.trace.legend), hatched when it ran for the backward pass, as the timelines draw it."""
    kind, _, when = collective.partition(" (")
    color = KINDS[kind].color if kind in KINDS else OTHER_COLOR
    return color, "x" if when.startswith("backward") else ""
COMPUTED = "sent per step (computed)"
UNDER_AXIS_PX = 60  # from the bytes panel's bottom to the legend: its devices' numbers, then its engines' names


def prepare(traces: list[Trace]) -> tuple[list[tuple[str, str]], dict[str, list[float]], dict[str, list[float]],
                                           list[float | None], list[str]]:
    """The x positions (engine, device), memory per family and bytes per collective at each, the computed bytes
    sent at each, and each device's moment (for the hover)."""
    positions, moments = [], []
    memory: dict[str, list[float]] = {}
    handed: dict[str, list[float]] = {}
    computed: list[float | None] = []
    for trace in traces:
        lanes = {m.lane: m for m in memory_by_kind(trace)}
        for moved in bytes_per_step(trace):
            held = lanes.get(moved.lane)
            positions.append((moved.engine, moved.lane))
            moments.append(held.moment if held else "no memory sampled")
            computed.append(moved.computed)
            for family, amount in (held.kinds.items() if held else ()):
                memory.setdefault(family, [0.0] * (len(positions) - 1))
            for family, column in memory.items():
                column.append(float(held.kinds.get(family, 0)) if held else 0.0)
            for collective in moved.measured:
                handed.setdefault(collective, [0.0] * (len(positions) - 1))
            for collective, column in handed.items():
                column.append(moved.measured.get(collective, 0.0))
    order = lambda table, known: {k: table[k] for k in known if k in table} | {k: v for k, v in table.items() if k not in known}
    return positions, order(memory, FAMILIES), order(handed, COLLECTIVES), computed, moments


def plot_memory_compare(positions, memory, handed, computed, moments, *, unit: ByteUnit, title: str,
                        notes: list[str]) -> go.Figure:
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.3,  # room for two rows of names: devices, engines
                        subplot_titles=["Memory per device by kind, each at the end of its last whole step",
                                        "Bytes per step: handed to each collective (measured); ◆ sent (computed)"])
    # Under each bar its device's number, under each group its engine: "rank 0" sixteen times over would stand on
    # end and run into the panel below. The hovers name the device whole.
    x = [[engine for engine, _ in positions], [lane.split()[-1] for _, lane in positions]]
    names = [f"{engine} {lane}" for engine, lane in positions]
    for family, amounts in memory.items():
        fig.add_trace(go.Bar(
            x=x, y=unit.scaled(amounts), name=family,
            marker=dict(color=FAMILY_COLORS.get(family, OTHER_COLOR), line=dict(color=OUTLINE, width=0.6)),
            customdata=[[unit.amount(a), m, n] for a, m, n in zip(amounts, moments, names)],
            hovertemplate=f"%{{customdata[2]}}<br>{family}: %{{customdata[0]}}<br>at %{{customdata[1]}}<extra></extra>",
        ), row=1, col=1)
    for collective, amounts in handed.items():
        color, hatch = collective_look(collective)
        fig.add_trace(go.Bar(
            x=x, y=unit.scaled(amounts), name=collective,
            marker=dict(color=color, line=dict(color=OUTLINE, width=0.6), pattern=dict(shape=hatch)),
            customdata=[[unit.amount(a), n] for a, n in zip(amounts, names)],
            hovertemplate=f"%{{customdata[1]}}<br>{collective}: %{{customdata[0]}} of tensors per step (measured)"
                          "<extra></extra>",
        ), row=2, col=1)
    shown = [(i, c) for i, c in enumerate(computed) if c is not None]
    if shown:
        fig.add_trace(go.Scatter(
            x=[[x[0][i] for i, _ in shown], [x[1][i] for i, _ in shown]], y=unit.scaled(c for _, c in shown), name=COMPUTED,
            mode="markers",
            # white edged in dark grey: shows on the light page and on the dark one
            marker=dict(symbol="diamond", size=13, color="#FFFFFF", line=dict(color=OUTLINE, width=2)),
            customdata=[[unit.amount(c), names[i]] for i, c in shown],
            hovertemplate="%{customdata[1]}<br>sends %{customdata[0]} per step (computed)<extra></extra>",
        ), row=2, col=1)
    fig.update_yaxes(rangemode="tozero", **unit.axis("memory"), row=1, col=1)
    fig.update_yaxes(rangemode="tozero", **unit.axis("per step"), row=2, col=1)
    # Under the panels, in rows (legends.legend_under_plot): the kinds, the collectives, then ◆. Beside them it left the
    # plot 160 px of a 440 px chart, too narrow for the engines' names; above them its rows would push the bytes
    # panel off a projector's first screen.
    fig.update_layout(barmode="stack", legend=dict(traceorder="normal", orientation="h"))  # placed: not over the title
    styled(fig, title, notes, height=540)  # with a preset's line over it, on a projector's first screen
    return legend_under_plot(fig, [t.name for t in fig.data], UNDER_AXIS_PX)


def memory_compare_figure(traces: list[Trace]) -> go.Figure:
    """The runs of one set of settings under several engines (DataParallel's first, if it ran), side by side."""
    if not traces:
        raise ValueError("memory_compare_figure needs at least one run")
    positions, memory, handed, computed, moments = prepare(traces)
    ranks = {len(t.lanes) for t in traces}
    devices = f"{ranks.pop()} devices each" if len(ranks) == 1 else "devices as each ran"
    # One unit for both panels and the title: the tallest stack's, or the highest diamond's.
    stacks = [sum(column[i] for column in table.values()) for table in (memory, handed) for i in range(len(positions))]
    unit = byte_unit(max([*stacks, *(c for c in computed if c is not None)], default=0))
    title = state_title(traces, unit.amount)
    notes = [f"{', '.join(t.spec.short for t in traces)} at the same settings, {devices}",
             read_at(traces) or "memory: the tensors each device holds",
             "collectives: the tensors each rank handed them (measured)",
             f"◆ sent: what each device sends per step, {averaged(traces)}, by NCCL's ring algorithms and "
             "DataParallel's copies (computed; gloo runs others)"]
    return plot_memory_compare(positions, memory, handed, computed, moments, unit=unit, title=title, notes=notes)

"""Where the memory goes: the same settings under several engines, each device's memory by kind and the bytes
it moves per step, side by side.

memory_compare_figure, the lesson, whole on a projector's first screen: one stacked bar per device (a rank, or a
simulated GPU), grouped by engine, every device read at the same moment (the end of the last full step, after the
optimizer's step; what a step makes and frees at its peak in it), from each engine's memory ledger
(dpviz.analysis.memory_compare). Two panels on one row of devices, each on its own scale: the model's state
(parameters, gradients, optimizer state: what halves from DDP to ZeRO-1 to FSDP), then activations and
communication buffers, which on the same scale left the state in slivers.
bytes_per_step_figure, a chart of its own under it on the page: per device, the bytes of the tensors it handed its
collectives per step (measured: what the rank code passed them), stacked by collective, and a diamond at the bytes
it sends per step by the textbook ring algorithms NCCL runs (computed; DataParallel's: its copies), the count a
comparison's Compare bars draw. Every amount of a chart, ticks and title alike, in one binary unit
(dpviz.figures.byte_unit). Drawn from plain lists: no pandas.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.memory_compare import COLLECTIVES, FAMILIES, MODEL_STATE, bytes_per_step, memory_by_kind, moments as read_at, state_title
from dpviz.analysis.traffic import which_steps
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
# The memory chart's panels: the model's state a device holds, and what a step makes and frees at its peak in it
# (activations; FSDP's gathered parameters) with the buffers kept for communication. Each panel's title says what
# it draws; its axis, too short for those words, how they are counted, in the chart's one unit.
STATE_PANEL, STATE_AXIS = "Model state per device", "held"
PEAK_PANEL, PEAK_AXIS = "Activations and buffers, at peak", "at peak"
# Of the plot's height: the lesson's panel well the larger (at 0.58 Presenting's 1024 × 768 left it 64 px to the
# activations' 46), the activations' still tall enough for their bars; room for a title between.
STATE_SHARE, PANEL_GAP = [0.72, 0.28], 0.13
HEADROOM = 1.08  # each panel's axis runs a little past its tallest bar
UNDER_AXIS_PX = 60  # from a plot's bottom to its legend: its devices' numbers, then its engines' names
# The memory chart keeps its two panels about 200 px under its title and over its legend: with a preset's box over
# it, on a projector's first screen (Presenting shrinks them further to fit there).
MEMORY_HEIGHT_PX, BYTES_HEIGHT_PX = 340, 380


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


def _device_axis(positions: list[tuple[str, str]]) -> tuple[list[list[str]], list[str]]:
    """The x positions as two rows of names (under each bar its device's number, under each group its engine:
    "rank 0" sixteen times over would stand on end) and each device named whole, for the hovers."""
    return ([[engine for engine, _ in positions], [lane.split()[-1] for _, lane in positions]],
            [f"{engine} {lane}" for engine, lane in positions])


def panels(memory: dict[str, list[float]]) -> list[tuple[str, str, dict[str, list[float]]]]:
    """The families in their panels, top to bottom, each with its title and its axis's words: the model's state
    (what ZeRO and FSDP shard: the lesson), then what a step makes at its peak (activations) and the buffers; a
    panel with nothing to draw left out."""
    state = {family: amounts for family, amounts in memory.items() if family in MODEL_STATE}
    rest = {family: amounts for family, amounts in memory.items() if family not in MODEL_STATE}
    found = [(STATE_PANEL, STATE_AXIS, state), (PEAK_PANEL, PEAK_AXIS, rest)]
    return [panel for panel in found if any(any(column) for column in panel[2].values())] or found[:1]


def round_under(top: float) -> float:
    """The largest of 1, 2 and 5 times a power of ten at or under `top` (0 for nothing): a tick a class reads."""
    if top <= 0:
        return 0
    power = 10 ** math.floor(math.log10(top))
    return max(step * power for step in (1, 2, 5) if step * power <= top)


def plot_memory_by_kind(positions, memory, moments, *, unit: ByteUnit, title: str, notes: list[str]) -> go.Figure:
    """One stacked bar per device, grouped by engine, by kind: the lesson, whole on a projector's first screen. The
    model's state has a panel of its own over the activations and buffers, each on its own scale: beside a step's
    activations, several times larger, the state that halves from DDP to ZeRO-1 to FSDP was drawn in slivers."""
    groups = panels(memory)
    fig = make_subplots(rows=len(groups), cols=1, shared_xaxes=True, vertical_spacing=PANEL_GAP,
                        row_heights=STATE_SHARE if len(groups) == 2 else None,
                        subplot_titles=[heading for heading, _, _ in groups])
    x, names = _device_axis(positions)
    for row, (_, words, group) in enumerate(groups, start=1):
        for family, amounts in group.items():
            fig.add_trace(go.Bar(
                x=x, y=unit.scaled(amounts), name=family,
                marker=dict(color=FAMILY_COLORS.get(family, OTHER_COLOR), line=dict(color=OUTLINE, width=0.6)),
                customdata=[[unit.amount(a), m, n] for a, m, n in zip(amounts, moments, names)],
                hovertemplate=f"%{{customdata[2]}}<br>{family}: %{{customdata[0]}}<br>at %{{customdata[1]}}<extra></extra>",
            ), row=row, col=1)
        top = max((sum(column[i] for column in group.values()) for i in range(len(positions))), default=0) / unit.size
        # The lower panel is too short for plotly's ticks at Presenting's larger type (0, 50 and 100 ran together,
        # then 0 and 500 at its smaller share): one, a round number under its top, over the bars' base line.
        ticks = dict(nticks=4) if row == 1 else dict(tickmode="array", tickvals=[round_under(top)])
        fig.update_yaxes(range=[0, top * HEADROOM or 1], **ticks, **unit.axis(words), row=row, col=1)
    # The kinds in rows under the devices' numbers and engines' names: read after the bars, as the tabs' memory
    # charts read.
    fig.update_layout(barmode="stack", legend=dict(traceorder="normal", orientation="h"))
    styled(fig, title, notes, height=MEMORY_HEIGHT_PX)
    return legend_under_plot(fig, [t.name for t in fig.data], UNDER_AXIS_PX)


def plot_bytes_per_step(positions, handed, computed, *, unit: ByteUnit, title: str, notes: list[str]) -> go.Figure:
    """Per device, the bytes it handed each collective per step (stacked) and a diamond at what it sends."""
    fig = go.Figure()
    x, names = _device_axis(positions)
    for collective, amounts in handed.items():
        color, hatch = collective_look(collective)
        fig.add_trace(go.Bar(
            x=x, y=unit.scaled(amounts), name=collective,
            marker=dict(color=color, line=dict(color=OUTLINE, width=0.6), pattern=dict(shape=hatch)),
            customdata=[[unit.amount(a), n] for a, n in zip(amounts, names)],
            hovertemplate=f"%{{customdata[1]}}<br>{collective}: %{{customdata[0]}} of tensors per step (measured)"
                          "<extra></extra>",
        ))
    shown = [(i, c) for i, c in enumerate(computed) if c is not None]
    if shown:
        fig.add_trace(go.Scatter(
            x=[[x[0][i] for i, _ in shown], [x[1][i] for i, _ in shown]], y=unit.scaled(c for _, c in shown), name=COMPUTED,
            mode="markers",
            # white edged in dark grey: shows on the light page and on the dark one
            marker=dict(symbol="diamond", size=13, color="#FFFFFF", line=dict(color=OUTLINE, width=2)),
            customdata=[[unit.amount(c), names[i]] for i, c in shown],
            hovertemplate="%{customdata[1]}<br>sends %{customdata[0]} per step (computed)<extra></extra>",
        ))
    fig.update_yaxes(rangemode="tozero", **unit.axis("per step"))
    fig.update_layout(barmode="stack", legend=dict(traceorder="normal", orientation="h"))
    styled(fig, title, notes, height=BYTES_HEIGHT_PX)
    return legend_under_plot(fig, [t.name for t in fig.data], UNDER_AXIS_PX)


def _devices(traces: list[Trace]) -> str:
    ranks = {len(t.lanes) for t in traces}
    return f"{ranks.pop()} devices each" if len(ranks) == 1 else "devices as each ran"


def memory_compare_figure(traces: list[Trace]) -> go.Figure:
    """Each device's memory by kind, every engine's at the same moment, side by side (DataParallel's first, if it
    ran): the lesson, whole on a projector's first screen. bytes_per_step_figure draws what they move, under it."""
    if not traces:
        raise ValueError("memory_compare_figure needs at least one run")
    positions, memory, _, _, moments = prepare(traces)
    # One unit for the axis and the title: the tallest stack's.
    unit = byte_unit(max((sum(column[i] for column in memory.values()) for i in range(len(positions))), default=0))
    # When each engine's devices are read, step by step, is said under the chart (dpviz.page.memory): here the
    # moment alone, which every engine shares.
    notes = [f"{', '.join(t.spec.short for t in traces)} at the same settings, {_devices(traces)}",
             "each device at the end of its last full step" if read_at(traces) else "the tensors each device holds"]
    return plot_memory_by_kind(positions, memory, moments, unit=unit, title=state_title(traces, unit.amount),
                               notes=notes)


def bytes_per_step_figure(traces: list[Trace]) -> go.Figure:
    """Per device of each engine, the bytes of the tensors it handed its collectives per step (measured) and the
    bytes it sends (computed, ◆)."""
    if not traces:
        raise ValueError("bytes_per_step_figure needs at least one run")
    positions, _, handed, computed, _ = prepare(traces)
    stacks = [sum(column[i] for column in handed.values()) for i in range(len(positions))]
    unit = byte_unit(max([*stacks, *(c for c in computed if c is not None)], default=0))
    notes = [f"{', '.join(t.spec.short for t in traces)}, {_devices(traces)}",
             "collectives: the tensors each rank handed them (measured)",
             f"◆ sent: what each device sends {which_steps(traces)}, by NCCL's ring algorithms and "
             "DataParallel's copies (computed; gloo runs others)"]
    return plot_bytes_per_step(positions, handed, computed, unit=unit,
                               title="Bytes per step: handed to each collective (measured); ◆ sent (computed)",
                               notes=notes)

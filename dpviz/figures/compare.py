"""DataParallel beside DDP: what each device sends per step, and how that grows with the device count.

Top: one stacked bar per device, the bytes it sends per step on average by what it sends (computed from the two
runs, see dpviz.analysis.compare): DataParallel's GPU 0 sends every other GPU its chunk and a model copy (and in
training each output's gradient), each other GPU sends back its output (and its gradients), while DDP's ranks each
send their share of the all-reduce. Below: the same formulas at 2 to 16 devices (dpviz.analysis.traffic_model):
what GPU 0 sends grows with every device added, what a rank sends for its all-reduce stays under twice the
gradients. The bars count what the Memory page's diamonds count (dpviz.analysis.memory_compare): bytes sent.
Every amount, ticks and titles alike, in one binary unit (dpviz.figures.byte_unit). Settings that cannot show
GPU 0 as the hub say so in the title, and what to change (dpviz.analysis.hub_lesson).
Drawn from plain lists: the Compare tab needs no pandas.
"""
from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.compare import traffic
from dpviz.analysis.hub_lesson import hub_lesson
from dpviz.engines import vocabulary
from dpviz.trace import Trace
from dpviz.analysis.traffic_model import StepSizes, growth
from dpviz.figures.byte_unit import ByteUnit, byte_unit
from dpviz.figures.colors import GUIDE, OUTLINE, device_color
from dpviz.figures.layout import styled
from dpviz.figures.legends import legend_under_plot
from dpviz.figures.presenting import TICK_GAP_PX
from dpviz.figures.sizes import MARGIN, NARROWEST_PX, TICK_SIZE
from dpviz.figures.text_fit import text_px

# The two engines this page sets side by side, in their own colours and words (the registry's vocabularies).
DP, DDP = vocabulary("dp"), vocabulary("ddp")
# One colour per kind of traffic, the same in both panels: the colour of the phase that moves it where
# there is one (the timelines'), 3:1 on the light and the dark page, apart under colour blindness.
WHAT_COLORS = {
    "input chunk": DP.phase("scatter").color, "parameter copy": DP.phase("replicate").color,
    "output gathered": DP.phase("gather").color, "output gradient": "#AA22EE", "gradient sum": "#EE5555",
    "all-reduce": DDP.phase("allreduce").color, "buffers": DDP.phase("buffers").color,
}
# What the legend calls each kind: the phases' own names where dpviz.analysis.compare's differ.
WHAT_NAMES = {"gradient sum": DP.phase("reduce").label}
COUNTS = range(2, 17)  # the device counts the growth panel draws
# The growth panel's lines: DataParallel's GPU 0 in GPU 0's colour, its busiest other GPU, a DDP rank.
LINES = (("gpu0", "DataParallel: GPU 0", "solid"), ("other_gpu", "DataParallel: any other GPU", "dot"),
         ("rank", "DDP: any rank", "dash"))


def prepare_traffic(trace: Trace) -> dict[str, list[tuple[str, float]]]:
    """Per kind of traffic, (device, bytes it sends per step on average), devices in order."""
    totals: dict[tuple[int, str], int] = defaultdict(int)
    for move in traffic(trace):
        totals[(move.lane, move.what)] += move.sent
    steps = max(1, len(trace.batches))
    return {what: [(trace.vocabulary.lane_name(lane.id), totals.get((lane.id, what), 0) / steps) for lane in trace.lanes]
            for what in WHAT_COLORS}


def device_totals(table: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for rows in table.values():
        for device, moved in rows:
            totals[device] += moved
    return dict(totals)


SENT = "sent per step"  # what both panels' axes count, in the figure's unit
# The growth panel's lines are keyed in a legend of their own under its axis (legends.legend_under_plot), the text in
# the page's ink and the colour on the swatch: named at the lines' ends, the names of the two low lines ran into each
# other and into the axis's numbers, and in their own colours read at 2.3:1 on white.
UNDER_AXIS_PX = 62  # from the plot's bottom to that legend: the axis's numbers and its one-line title
PRESENTING = 1.35  # presentation()'s scale: the device names must fit at its larger type too


def device_ticks(names: list[str], share: float) -> dict:
    """The x axis of one engine's bars: under each its device's name ("GPU 3") where every name fits side by side
    on the narrowest chart at Presenting's larger type, else its number ("3") under the axis title "GPU", every
    k-th where even the numbers would run together. The hovers name the device whole."""
    size = TICK_SIZE * PRESENTING
    slot = (NARROWEST_PX - (MARGIN["l"] + MARGIN["r"]) * PRESENTING) * share / max(len(names), 1)
    if max((text_px(n, size) for n in names), default=0) + TICK_GAP_PX <= slot:
        return dict(tickmode="array", tickvals=names, ticktext=names)
    numbers = [n.rsplit(" ", 1)[-1] for n in names]
    step = max(1, math.ceil((max(text_px(n, size) for n in numbers) + TICK_GAP_PX) / slot))
    kind = names[0].rsplit(" ", 1)[0] if " " in names[0] else ""
    return dict(tickmode="array", tickvals=names[::step], ticktext=numbers[::step], title_text=kind)


def plot_comparison(tables: list[dict], titles: list[str], grown: list, devices: int, *, unit: ByteUnit, title: str,
                    notes: list[str]) -> go.Figure:
    fig = make_subplots(rows=2, cols=2, shared_yaxes=False, specs=[[{}, {}], [{"colspan": 2}, None]],
                        subplot_titles=titles, horizontal_spacing=0.08, vertical_spacing=0.3, row_heights=[0.55, 0.45])
    shown: set[str] = set()
    for col, table in enumerate(tables, start=1):
        for what, color in WHAT_COLORS.items():
            part = [(device, moved) for device, moved in table[what] if moved > 0]
            if not part:
                continue
            name = WHAT_NAMES.get(what, what)
            fig.add_trace(go.Bar(
                x=[d for d, _ in part], y=unit.scaled(m for _, m in part), name=name, legendgroup=what,
                showlegend=what not in shown, marker=dict(color=color, line=dict(color=OUTLINE, width=0.6)),
                customdata=[unit.amount(m) for _, m in part],
                hovertemplate=f"%{{x}}<br>{name}: %{{customdata}} sent per step (computed)<extra></extra>",
            ), row=1, col=col)
            shown.add(what)
        devices_in = [device for device, _ in table[next(iter(WHAT_COLORS))]]
        share = fig.layout["xaxis" if col == 1 else "xaxis2"].domain
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=devices_in,
                         **device_ticks(devices_in, share[1] - share[0]), row=1, col=col)
    top = max((max(device_totals(table).values(), default=0) for table in tables), default=0) / unit.size
    for col in (1, 2):  # one scale for both engines: GPU 0's bar against a rank's, side by side
        fig.update_yaxes(range=[0, top * 1.08 or 1], row=1, col=col)
    fig.update_yaxes(**unit.axis(SENT), row=1, col=1)
    fig.update_yaxes(exponentformat="none", separatethousands=True, row=1, col=2)  # its ticks read as the left's
    highest = max((getattr(g, key) for g in grown for key, _, _ in LINES), default=0) / unit.size
    here = [max(getattr(g, key) for key, _, _ in LINES) / unit.size for g in grown if g.devices == devices]
    # room over the lines at this run's count for the dotted mark that stands there
    ceiling = max(highest * 1.08, (here[0] if here else 0) + highest * 0.25) or 1
    for key, name, dash in LINES:
        ys = [getattr(g, key) for g in grown]
        color = device_color(0) if key == "gpu0" else DDP.phase("allreduce").color if key == "rank" else device_color(1)
        fig.add_trace(go.Scatter(
            x=[g.devices for g in grown], y=unit.scaled(ys), name=name, mode="lines+markers", legend="legend2",
            # small points: a line running over another's point still has that point's page on both its sides
            line=dict(color=color, dash=dash, width=3), marker=dict(size=5), customdata=[unit.amount(y) for y in ys],
            hovertemplate=f"%{{x}} devices<br>{name}: %{{customdata}} sent per step (computed)<extra></extra>",
        ), row=2, col=1)
    # This run's count: a dotted mark from over its points to the panel's top, crossing no line (drawn across them
    # it was grey on GPU 0's blue, 1:1).
    fig.add_shape(type="line", x0=devices, x1=devices, y0=here[0] + highest * 0.08 if here else 0, y1=ceiling,
                  line=dict(color=GUIDE, dash="dot", width=2), row=2, col=1)
    # one line even at Presenting's size: the legend under it says which lines are GPUs and which ranks
    fig.update_xaxes(title_text="devices (GPUs or ranks)", dtick=2, row=2, col=1)
    fig.update_yaxes(range=[0, ceiling], **unit.axis(SENT), row=2, col=1)
    fig.update_layout(barmode="stack")  # styled() puts the bars' legend over the panels' titles
    styled(fig, title, notes, height=480)  # with its title, legend and a preset's line, on a 1024 × 768 first screen
    return legend_under_plot(fig, [name for _, name, _ in LINES], UNDER_AXIS_PX, legend="legend2")


def comparison_figure(dp: Trace, ddp: Trace) -> go.Figure:
    tables = [prepare_traffic(dp), prepare_traffic(ddp)]
    totals = [device_totals(t) for t in tables]
    grown = growth(StepSizes.of(dp, ddp), COUNTS, dp.spec.part("moves_at"), ddp.spec.part("moves_at"))
    first = dp.vocabulary.lane_name(dp.lanes[0].id)
    gpu0, rank = totals[0].get(first, 0), max(totals[1].values(), default=0)
    # One unit for the whole figure, the tallest bar's (the unit its titles and the sentences under it say): the
    # growth panel's lines may pass 1,024 of it at 16 devices, its ticks then "1,500".
    unit = byte_unit(max([gpu0, rank, *(max(t.values(), default=0) for t in totals)]))
    titles = [f"DataParallel: {first} sends {unit.amount(gpu0)}" if gpu0 else "DataParallel: nothing sent",
              f"DDP: at most {unit.amount(rank)} a rank" if rank else "DDP: nothing sent",
              "The same formulas at 2 to 16 devices (the dotted line: this run)"]
    lesson = hub_lesson(dp, ddp)
    if not lesson.shows:  # the visitor's settings stay; the figure says what would show its lesson
        title = f"These settings cannot show {first} as the hub: {lesson.change}"
    elif rank:
        title = f"Every step, {first} sends {gpu0 / rank:.1f}× what a DDP rank sends"
    else:
        title = f"Every step, {first} sends {unit.amount(gpu0)}; DDP's ranks send nothing"
    notes = [f"{lesson.why[:1].upper()}{lesson.why[1:]}" if not lesson.shows else "",
             f"{len(dp.lanes)} {'simulated devices' if dp.simulated else 'GPUs'} against {len(ddp.lanes)} ranks "
             f"({'processes on the CPU' if ddp.backend == 'cpu' else 'one process per GPU'})",
             "bytes each device sends, computed from the rows, outputs, parameters and gradients each run recorded"]
    return plot_comparison(tables, titles, grown, len(dp.lanes), unit=unit, title=title, notes=notes)

"""Two engines side by side: what each device sends per step, and how that grows with the device count.

comparison_figure: for each engine, one stacked bar per device, the bytes it sends per step on average by what it sends
(computed from the run, dpviz.analysis.traffic), each part in the colour of the kind of collective that carries it
(dpviz.trace.legend: the same in every engine), hatched where it moves for the backward pass. Both panels share one
scale, so one engine's busiest device stands against the other's by height: the lesson, whole on a projector's
first screen. growth_figure, a chart of its own under it on the page: each engine's own formula
(its `moves_at`) at 2 to 16 devices: its first device and the busiest of the others, or any device where all send
alike. The bars count what the Memory page's diamonds count: bytes sent. Every amount, ticks and titles alike, in
one binary unit (dpviz.figures.byte_unit). Where an engine's lesson cannot show at these settings (its
`compare_lesson`), the title says so, and what to change. Drawn from plain lists: the Compare tab needs no pandas.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.compare import busiest, lessons, ratio_headline
from dpviz.analysis.traffic import evened, sent_by_kind, sent_per_step, which_steps
from dpviz.analysis.traffic_model import StepSizes, growth
from dpviz.figures.byte_unit import ByteUnit, byte_unit
from dpviz.figures.colors import GUIDE, OUTLINE, device_color
from dpviz.figures.layout import styled
from dpviz.figures.legends import legend_under_plot
from dpviz.figures.presenting import TICK_GAP_PX
from dpviz.figures.sizes import MARGIN, NARROWEST_PX, TICK_SIZE
from dpviz.figures.text_fit import text_px
from dpviz.trace import Trace
from dpviz.trace.legend import KINDS

COUNTS = range(2, 17)  # the device counts the growth panel draws
BACKWARD = "x"  # the hatch of what moves for the backward pass, as the timelines hatch backward

SENT = "sent per step"  # what both panels' axes count, in the figure's unit
# The growth panel's lines are keyed in a legend of their own under its axis (legends.legend_under_plot), the text in
# the page's ink and the colour on the swatch: named at the lines' ends, the names of the two low lines ran into each
# other and into the axis's numbers, and in their own colours read at 2.3:1 on white.
UNDER_AXIS_PX = 62  # from the plot's bottom to that legend: the axis's numbers and its one-line title
PRESENTING = 1.35  # presentation()'s scale: the device names must fit at its larger type too


def part_name(kind: str, what: str) -> str:
    """A bar part's legend entry: what moves, and the kind that carries it where the words do not say it."""
    return what if what == kind or kind in what else f"{what} ({kind})"


def prepare_traffic(trace: Trace) -> list[tuple[str, str, bool, list[tuple[str, float]]]]:
    """Per part of what moves (kind, name, backward), (device, bytes it sends per step on average), devices in order."""
    names = [trace.vocabulary.lane_name(lane.id) for lane in trace.lanes]
    return [(kind, part_name(kind, what), backward, list(zip(names, column)))
            for (kind, what, backward), column in sent_by_kind(trace).items()]


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


def growth_lines(traces: tuple[Trace, Trace]) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """Per engine with a formula: (name, dash, [(devices, bytes sent per step)]): its first device and the busiest
    of the others where its first device differs (a lead lane), else any device."""
    sizes = StepSizes.of(*traces)
    lines = []
    for trace, dashes in zip(traces, (("solid", "dot"), ("dash", "dashdot"))):
        if not trace.spec.has("moves_at"):
            continue
        rows = growth(sizes, COUNTS, trace.spec.part("moves_at"))
        label, vocabulary = trace.spec.short, trace.vocabulary
        if vocabulary.lead_lane:
            lines.append((f"{label}: {vocabulary.lane_name(0)}", dashes[0], [(r.devices, r.first) for r in rows]))
            lines.append((f"{label}: any other {vocabulary.lane_noun}", dashes[1], [(r.devices, r.other) for r in rows]))
        else:
            lines.append((f"{label}: any {vocabulary.lane_noun}", dashes[0], [(r.devices, r.most) for r in rows]))
    return lines


def plot_comparison(tables: list[list], titles: list[str], *, unit: ByteUnit, title: str,
                    notes: list[str]) -> go.Figure:
    """Each engine's bytes sent per step per device, by what moves, side by side on one scale."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=False, subplot_titles=titles, horizontal_spacing=0.08)
    shown: set[str] = set()
    top = 0.0
    for col, table in enumerate(tables, start=1):
        totals: dict[str, float] = {}
        for kind, name, backward, column in table:
            for device, moved in column:
                totals[device] = totals.get(device, 0) + moved
            part = [(device, moved) for device, moved in column if moved > 0]
            if not part:
                continue
            fig.add_trace(go.Bar(
                x=[d for d, _ in part], y=unit.scaled(m for _, m in part), name=name, legendgroup=name, meta=kind,
                showlegend=name not in shown,
                marker=dict(color=KINDS[kind].color, line=dict(color=OUTLINE, width=0.6),
                            pattern=dict(shape=BACKWARD if backward else "")),
                customdata=[unit.amount(m) for _, m in part],
                hovertemplate=f"%{{x}}<br>{name}: %{{customdata}} sent per step (computed)<extra></extra>",
            ), row=1, col=col)
            shown.add(name)
        top = max(top, max(totals.values(), default=0))
        devices_in = list(totals) or [""]
        share = fig.layout["xaxis" if col == 1 else "xaxis2"].domain
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=devices_in,
                         **device_ticks(devices_in, share[1] - share[0]), row=1, col=col)
    top /= unit.size
    for col in (1, 2):  # one scale for both engines: one's busiest bar against the other's, side by side
        fig.update_yaxes(range=[0, top * 1.08 or 1], row=1, col=col)
    fig.update_yaxes(**unit.axis(SENT), row=1, col=1)
    fig.update_yaxes(exponentformat="none", separatethousands=True, row=1, col=2)  # its ticks read as the left's
    fig.update_layout(barmode="stack")  # styled() puts the bars' legend over the panels' titles
    return styled(fig, title, notes, height=300)  # with its title, legend and a link's notice, on a 1024 × 768 first screen


def plot_growth(lines: list, devices: int, *, unit: ByteUnit, title: str, notes: list[str]) -> go.Figure:
    """Each engine's formula at 2 to 16 devices, this run's count marked over the lines."""
    fig = go.Figure()
    highest = max((y for _, _, points in lines for _, y in points), default=0) / unit.size
    here = [max(y for d, y in points if d == devices) / unit.size for _, _, points in lines if any(d == devices for d, _ in points)]
    # room over the lines at this run's count for the dotted mark that stands there
    ceiling = max(highest * 1.08, (max(here) if here else 0) + highest * 0.25) or 1
    for index, (name, dash, points) in enumerate(lines):
        ys = [y for _, y in points]
        fig.add_trace(go.Scatter(
            x=[d for d, _ in points], y=unit.scaled(ys), name=name, mode="lines+markers", legend="legend2",
            # small points: a line running over another's point still has that point's page on both its sides
            line=dict(color=device_color(index), dash=dash, width=3), marker=dict(size=5),
            customdata=[unit.amount(y) for y in ys],
            hovertemplate=f"%{{x}} devices<br>{name}: %{{customdata}} sent per step (computed)<extra></extra>",
        ))
    # This run's count: a dotted mark from over its points to the panel's top, crossing no line (drawn across them
    # it was grey on the first line's blue, 1:1).
    fig.add_shape(type="line", x0=devices, x1=devices, y0=max(here) + highest * 0.08 if here else 0, y1=ceiling,
                  line=dict(color=GUIDE, dash="dot", width=2))
    fig.update_xaxes(title_text="devices", dtick=2)
    fig.update_yaxes(range=[0, ceiling], **unit.axis(SENT))
    styled(fig, title, notes, height=300)
    return legend_under_plot(fig, [name for name, _, _ in lines], UNDER_AXIS_PX, legend="legend2")


def panel_title(trace: Trace, unit: ByteUnit) -> str:
    """'DataParallel: GPU 0 sends 1.2 KiB', 'DDP: at most 296 B a rank', 'X: 72 B a rank on average' (every rank
    given an even share of what the ranks move unevenly, Move.evened), 'FSDP: nothing sent'."""
    sent = sent_per_step(trace)
    most = max(sent, default=0)
    if not most:
        return f"{trace.spec.short}: nothing sent"
    if trace.vocabulary.lead_lane and sent.index(most) == 0:
        return f"{trace.spec.short}: {trace.vocabulary.lane_name(trace.lanes[0].id)} sends {unit.amount(most)}"
    if evened(trace) and len(set(sent)) == 1:  # every rank given the same share of an uneven move: its mean
        return f"{trace.spec.short}: {unit.amount(most)} a {trace.vocabulary.lane_noun} on average"
    return f"{trace.spec.short}: at most {unit.amount(most)} a {trace.vocabulary.lane_noun}"


def _what_runs(trace: Trace) -> str:
    """'4 simulated GPUs', '4 DDP ranks (processes on the CPU)': what stood in for each engine's devices."""
    noun = trace.vocabulary.lane_noun
    if trace.simulated:
        return f"{len(trace.lanes)} simulated {noun}s"
    where = " (processes on the CPU)" if trace.backend == "cpu" else ""
    return f"{len(trace.lanes)} {trace.spec.short} {noun}s{where}"


def _both_run(a: Trace, b: Trace) -> str:
    """'4 simulated GPUs against 4 DDP ranks (processes on the CPU)'; where both ran as processes on the CPU, that
    said once: '4 TP ranks against 4 FSDP ranks, each a process on the CPU'."""
    if all(not t.simulated and t.backend == "cpu" for t in (a, b)):
        alone = [f"{len(t.lanes)} {t.spec.short} {t.vocabulary.lane_noun}s" for t in (a, b)]
        return f"{alone[0]} against {alone[1]}, each a process on the CPU"
    return f"{_what_runs(a)} against {_what_runs(b)}"


def _unit(a: Trace, b: Trace) -> ByteUnit:
    """One unit for both figures, the tallest bar's (the unit their titles and the sentences under them say): the
    growth lines may pass 1,024 of it at 16 devices, its ticks then "1,500"."""
    return byte_unit(max([busiest(trace)[1] for trace in (a, b)] + [0]))


def comparison_figure(a: Trace, b: Trace) -> go.Figure:
    """What each device of each engine sends per step, by what moves: the lesson, whole on a projector's first
    screen. growth_figure draws the formulas by device count, under it on the page."""
    traces = (a, b)
    tables = [prepare_traffic(trace) for trace in traces]
    unit = _unit(a, b)
    titles = [panel_title(trace, unit) for trace in traces]
    shown = lessons(a, b)
    title = (f"These settings cannot {shown[0].cannot}: {shown[0].change}" if shown else ratio_headline(a, b))
    notes = [f"{shown[0].why[:1].upper()}{shown[0].why[1:]}" if shown else "",
             _both_run(a, b), f"bytes sent {which_steps(list(traces))}, computed"]
    return plot_comparison(tables, titles, unit=unit, title=title, notes=[n for n in notes if n])


def growth_figure(a: Trace, b: Trace) -> go.Figure | None:
    """Each engine's formula of sizes alone at 2 to 16 devices (its first device and the busiest other, or any
    device), this run's count dotted; None when neither engine has one."""
    lines = growth_lines((a, b))
    if not lines:
        return None
    # An engine with no formula of sizes alone (its bytes turn on each parameter's padding, or on where the model is
    # cut) has no line: the title says so.
    missing = [trace.spec.short for trace in (a, b) if not trace.spec.has("moves_at")]
    title = f"The same formulas at 2 to 16 devices (dotted: this run's {len(a.lanes)})" + (
        f"; none for {' or '.join(missing)}" if missing else "")
    return plot_growth(lines, len(a.lanes), unit=_unit(a, b), title=title,
                       notes=["bytes sent per step, computed from the model's sizes"])

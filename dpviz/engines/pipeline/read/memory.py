"""Memory per stage over a pipeline step: the activations each stage keeps for the microbatches in flight (each
forward adds its microbatch's, each backward frees them), pass by pass, from facts "flight"; and under it what
each stage holds for the whole run (its parameters, their gradients, its optimizer's state), from facts "held", a
chart of its own under the first (the view's second figure: a projector's first screen holds the stages' panels).

    memory_pipeline_figure(trace, batch=0)
    held_pipeline_figure(trace, batch=0)   # None where the step did not end

GPipe runs every forward before any backward, so its first stage holds all M microbatches' activations at once;
1F1B starts backwards early and holds at most S (stage s: S - s).

Each stage's activations take a panel of their own, one under the other on one scale, its name at its right: drawn
over each other, the stages' lines rose and fell at the same passes, so one ran along another for whole steps and
crossed it where no colour of the two stood out (stage 1's blue under stage 2's orange, 2.4:1).
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.wording import plural, plural_possessive
from dpviz.engines.pipeline.read.bubble import SCHEDULE_NAMES, ended
from dpviz.engines.pipeline.read.schedule import schedule_words, stage_label, stopped_figure
from dpviz.figures.byte_unit import ByteUnit, byte_unit
from dpviz.figures.colors import device_color
from dpviz.figures.arguments import check_batch
from dpviz.figures.layout import styled
from dpviz.figures.sizes import AXIS_TITLE_SIZE, BASE_TOP_PX, MARGIN, TICK_SIZE
from dpviz.figures.text_fit import text_px
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace

HELD = (("parameters", "#7766BB"), ("gradients", "#AA4444"), ("optimizer state", "#CC9999"))


def flight_of(trace: Trace, batch: int) -> list[list[list]]:
    """Per stage, its [step, pass, microbatch, bytes, microbatches held] rows of step `batch`."""
    flight = trace.facts.get("flight") or []
    rows = [[row for row in stage or [] if row[0] == batch] for stage in flight]
    if not any(rows):
        raise ValueError(f"this trace does not record the activations held in step {batch + 1:,}")
    return rows


# A stage's panel; the room between two (the lower one's top tick and the upper one's 0 apart, at Presenting's
# size too); under the stages, their passes' numbers and the axis title; the held bars' plot.
STAGE_PX, STAGE_GAP_PX, UNDER_STAGES_PX, HELD_PX = 80, 28, 80, 210
NAME_GAP_PX = 8  # between a panel's right edge and its stage's name
PASSES_TITLE = "the stage's passes in order (forward or backward)"
HELD_TITLE = "What each stage holds for the whole run"


def _top_tick(top: float) -> float:
    """A panel's one tick over its 0: the most a stage kept, to two figures, near the panel's top so that the two
    stand apart. Three ticks ran into each other on a panel a projector's first screen squeezed (Presenting, 4
    stages), and a round number under the most, at half the panel, met the 0."""
    return float(f"{top:.2g}")


def _held(trace: Trace) -> dict[str, list[int]]:
    """Per kind held (HELD), its bytes on each stage."""
    held = trace.facts.get("held") or []
    return {kind: [(h or {}).get(kind, {}).get("bytes", 0) for h in held] for kind, _ in HELD}


def _unit(trace: Trace, rows: list[list[list]]) -> ByteUnit:
    """One unit for both charts, the largest amount either draws: a stage's activations or what it holds."""
    kept = _held(trace)
    return byte_unit(max([row[3] for mine in rows for row in mine] + [sum(v) for v in zip(*kept.values())], default=0))


def memory_pipeline_figure(trace: Trace, batch: int = 0) -> go.Figure:
    """The lesson: each stage's activations kept for the microbatches in flight, pass by pass, a panel per stage.
    What each stage holds for the whole run is a chart of its own under it (held_pipeline_figure): together they
    ran past a projector's first screen."""
    check_batch(trace, batch)
    if not ended(trace, batch):  # the activations of a step that stopped part way are no step's
        return stopped_figure(trace, batch)
    rows = flight_of(trace, batch)
    unit = _unit(trace, rows)
    stages = len(rows)
    plot_px = stages * STAGE_PX + (stages - 1) * STAGE_GAP_PX
    fig = make_subplots(rows=stages, cols=1, row_heights=[STAGE_PX] * stages, vertical_spacing=STAGE_GAP_PX / plot_px,
                        subplot_titles=["Activations kept for microbatches in flight, pass by pass"] + [""] * (stages - 1))
    top = max((row[3] for mine in rows for row in mine), default=0) / unit.size or 1.0
    passes = max(len(mine) for mine in rows)
    dtick = max(1, passes // 10)
    for stage, mine in enumerate(rows):
        fig.add_trace(go.Scatter(
            x=list(range(1, len(mine) + 1)), y=unit.scaled(row[3] for row in mine), mode="lines+markers",
            name=stage_label(stage), showlegend=False, line=dict(color=device_color(stage), width=3, shape="hv"),
            marker=dict(color=device_color(stage), size=7),
            customdata=[[row[1], row[2] + 1, plural(row[4], "microbatch"), unit.amount(row[3])] for row in mine],
            hovertemplate=f"{stage_label(stage)}, pass %{{x}}: after the %{{customdata[0]}} of microbatch "
                          "%{customdata[1]}<br>%{customdata[2]} in flight, %{customdata[3]}<extra></extra>"),
            row=stage + 1, col=1)
        last = stage == stages - 1
        # Every stage on one scale, so their heights compare; the passes named once, under the last stage. No grid
        # lines: each rise and fall of a stage's steps would cross them, a pale rule over its colour; the ticks and
        # the markers' hovers give the amounts.
        fig.update_yaxes(range=[0, top * 1.15], tickmode="array", tickvals=[0, _top_tick(top)], showgrid=False,
                         exponentformat="none", separatethousands=True, row=stage + 1, col=1)
        fig.update_xaxes(matches=None if stage == 0 else "x", range=[0.5, passes + 0.5], dtick=dtick,
                         showticklabels=last, title_text=PASSES_TITLE if last else None, row=stage + 1, col=1)
        axis = "" if stage == 0 else stage + 1
        fig.add_annotation(text=stage_label(stage), x=1, xref="paper", xanchor="left", xshift=NAME_GAP_PX,
                           y=0.5, yref=f"y{axis} domain", yanchor="middle", showarrow=False, font=dict(size=TICK_SIZE))
    # The stages' one axis title, at the chart's left edge beside their panels' ticks (one per panel would not fit).
    fig.add_annotation(text=f"activations kept ({unit.name})", textangle=-90, x=0, xref="paper", xanchor="left",
                       xshift=-MARGIN["l"], y=0.5, yref="paper", yanchor="middle", showarrow=False,
                       font=dict(size=AXIS_TITLE_SIZE))
    most = [max((row[4] for row in mine), default=0) for mine in rows]
    config = trace.config
    bound = config.microbatches if config.schedule == "gpipe" else config.gpus
    kept = plural_possessive(most[0], "microbatch")
    title = (f"Step {batch + 1}: the first stage kept up to {kept} activations at once under "
             f"{SCHEDULE_NAMES[config.schedule]} ({'all M' if config.schedule == 'gpipe' else 'at most S'} = {bound})")
    styled(fig, title, [schedule_words(trace), backend_note(trace)], height=plot_px + BASE_TOP_PX + UNDER_STAGES_PX)
    # Room at the right for the stages' names, and under the stages for their passes' numbers and the axis title.
    right = MARGIN["r"] + NAME_GAP_PX + max(text_px(n, TICK_SIZE) for n in map(stage_label, range(stages)))
    return fig.update_layout(margin_r=round(right), margin_b=UNDER_STAGES_PX)


def held_pipeline_figure(trace: Trace, batch: int = 0) -> go.Figure | None:
    """Under the lesson: what each stage holds for the whole run (its parameters, their gradients, its optimizer's
    state), stacked, in the unit of the activations' chart; None where step `batch` did not end (its chart is then
    the passes it ran) or the trace records nothing held."""
    check_batch(trace, batch)
    held = trace.facts.get("held") or []
    if not held or not ended(trace, batch):
        return None
    unit = _unit(trace, flight_of(trace, batch))
    names = [stage_label(s) for s in range(len(held))]
    fig = go.Figure()
    for kind, color in HELD:
        values = _held(trace)[kind]
        fig.add_trace(go.Bar(x=names, y=unit.scaled(values), name=kind, marker=dict(color=color),
                             customdata=[unit.amount(v) for v in values],
                             hovertemplate=f"%{{x}}: {kind} %{{customdata}}<extra></extra>"))
    fig.update_yaxes(**unit.axis("held"))
    fig.update_layout(barmode="stack")
    return styled(fig, HELD_TITLE, [backend_note(trace)], height=HELD_PX + BASE_TOP_PX + MARGIN["b"])

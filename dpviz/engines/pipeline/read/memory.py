"""Memory per stage over a pipeline step: the activations each stage keeps for the microbatches in flight (each
forward adds its microbatch's, each backward frees them), pass by pass, from facts "flight"; and under it what
each stage holds for the whole run (its parameters, their gradients, its optimizer's state), from facts "held".

    memory_pipeline_figure(trace, batch=0)

GPipe runs every forward before any backward, so its first stage holds all M microbatches' activations at once;
1F1B starts backwards early and holds at most S (stage s: S - s).
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.analysis.wording import plural
from dpviz.engines.pipeline.read.bubble import SCHEDULE_NAMES, ended
from dpviz.engines.pipeline.read.schedule import schedule_words, stage_label, stopped_figure
from dpviz.figures.byte_unit import byte_unit
from dpviz.figures.colors import device_color
from dpviz.figures.style import backend_note, check_batch, styled
from dpviz.trace import Trace

HELD = (("parameters", "#7766BB"), ("gradients", "#AA4444"), ("optimizer state", "#CC9999"))


def flight_of(trace: Trace, batch: int) -> list[list[list]]:
    """Per stage, its [step, pass, microbatch, bytes, microbatches held] rows of step `batch`."""
    flight = trace.facts.get("flight") or []
    rows = [[row for row in stage or [] if row[0] == batch] for stage in flight]
    if not any(rows):
        raise ValueError(f"this trace does not record the activations held in step {batch + 1:,}")
    return rows


def memory_pipeline_figure(trace: Trace, batch: int = 0) -> go.Figure:
    check_batch(trace, batch)
    if not ended(trace, batch):  # the activations of a step that stopped part way are no step's
        return stopped_figure(trace, batch)
    rows = flight_of(trace, batch)
    held = trace.facts.get("held") or []
    names = [stage_label(s) for s in range(len(held))]
    kept = {kind: [(h or {}).get(kind, {}).get("bytes", 0) for h in held] for kind, _ in HELD}
    # One unit for both panels, the largest amount either draws: a stage's activations or what it holds.
    unit = byte_unit(max([row[3] for mine in rows for row in mine] + [sum(v) for v in zip(*kept.values())], default=0))
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.22, row_heights=[0.62, 0.38], subplot_titles=(
        "Activations kept for microbatches in flight, pass by pass", "What each stage holds for the whole run"))
    for stage, mine in enumerate(rows):
        fig.add_trace(go.Scatter(
            x=list(range(1, len(mine) + 1)), y=unit.scaled(row[3] for row in mine), mode="lines+markers",
            name=stage_label(stage), line=dict(color=device_color(stage), width=3, shape="hv"),
            marker=dict(color=device_color(stage), size=7),
            customdata=[[row[1], row[2] + 1, row[4], unit.amount(row[3])] for row in mine],
            hovertemplate=f"{stage_label(stage)}, pass %{{x}}: after the %{{customdata[0]}} of microbatch "
                          "%{customdata[1]}<br>%{customdata[2]} microbatches in flight, %{customdata[3]}<extra></extra>"),
            row=1, col=1)
    for kind, color in HELD:
        values = kept[kind]
        fig.add_trace(go.Bar(x=names, y=unit.scaled(values), name=kind, marker=dict(color=color),
                             customdata=[unit.amount(v) for v in values],
                             hovertemplate=f"%{{x}}: {kind} %{{customdata}}<extra></extra>"), row=2, col=1)
    most = [max((row[4] for row in mine), default=0) for mine in rows]
    config = trace.config
    bound = config.microbatches if config.schedule == "gpipe" else config.gpus
    title = (f"Step {batch + 1}: the first stage kept up to {plural(most[0], 'microbatch')}' activations at once under "
             f"{SCHEDULE_NAMES[config.schedule]} ({'all M' if config.schedule == 'gpipe' else 'at most S'} = {bound})")
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title="the stage's passes in order (forward or backward)", dtick=max(1, len(rows[0]) // 10),
                     row=1, col=1)
    fig.update_yaxes(**unit.axis("activations kept"), row=1, col=1)
    fig.update_yaxes(**unit.axis("held"), row=2, col=1)
    return styled(fig, title, [schedule_words(trace), backend_note(trace)], height=640)

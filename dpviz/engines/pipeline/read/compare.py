"""GPipe and 1F1B at the same settings, side by side: the textbook's grid of each (every pass one slot), the idle
share of each and the most microbatches' activations each keeps on a stage at once.

    schedules_figure(trace)

The run's own schedule is drawn in the order its stages ran (its opening step, measured); the other in the order
torch's schedule runs a stage's passes (bubble.schedule_order), not run here: run it to see it measured.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dpviz.engines.pipeline.read.bubble import lay_out, opening_step, percent, schedule_order, slot_share, slots
from dpviz.engines.pipeline.read.bubble import SCHEDULE_NAMES
from dpviz.analysis.wording import counted
from dpviz.engines.pipeline.read.schedule import KINDS, label_colors, microbatch_color, stage_label
from dpviz.figures.colors import IDLE_GREY, OUTLINE
from dpviz.figures.style import backend_note, styled
from dpviz.trace import Trace

ROW_PX, BASE_PX = 30, 250  # both grids of 4 stages on a projector's first screen


def in_flight(laid: list[list[tuple[str, int, int]]]) -> list[int]:
    """Per stage, the most microbatches between their forward and their backward at once."""
    most = []
    for row in laid:
        held = peak = 0
        for kind, _, _ in sorted(row, key=lambda p: p[2]):
            held += 1 if kind == "F" else -1
            peak = max(peak, held)
        most.append(peak)
    return most


def schedules_figure(trace: Trace) -> go.Figure:
    config = trace.config
    stages, micro = config.gpus, config.microbatches
    step = opening_step(trace)
    layouts = {}
    for name in SCHEDULE_NAMES:
        laid = slots(trace, step) if name == config.schedule else None  # None too when the step did not end
        ran = laid is not None
        if laid is None and (name == "gpipe" or micro >= stages):  # torch's Schedule1F1B needs M >= S
            laid = lay_out([schedule_order(name, stages, micro, s) for s in range(stages)])
        if laid is not None:
            layouts[name] = (laid, ran)
    titles = [f"{SCHEDULE_NAMES[name]}{' (this run, step ' + counted(step) + ')' if ran else ' (torch’s order, not run)'}: "
              f"idle {percent(slot_share(laid))}, stage 1 keeps {in_flight(laid)[0]} microbatches"
              for name, (laid, ran) in layouts.items()]
    fig = make_subplots(rows=len(layouts), cols=1, vertical_spacing=0.16, subplot_titles=titles, shared_xaxes=False)
    length = max(s + 1 for laid, _ in layouts.values() for row in laid for _, _, s in row)
    names = [stage_label(s) for s in range(stages)]
    for row_at, (name, (laid, _)) in enumerate(layouts.items(), start=1):
        first = row_at == 1
        fig.add_trace(go.Bar(y=names, x=[length] * stages, base=[0] * stages, orientation="h", name="idle (waiting)",
                             showlegend=first, legendgroup="idle", marker=dict(color=IDLE_GREY, line=dict(width=0)),
                             width=0.8, hoverinfo="skip"), row=row_at, col=1)
        for kind, (label, pattern) in KINDS.items():
            mine = [(stage, m, s) for stage, row in enumerate(laid) for k, m, s in row if k == kind]
            fig.add_trace(go.Bar(
                y=[stage_label(p[0]) for p in mine], x=[1] * len(mine), base=[p[2] for p in mine], orientation="h",
                name=label, showlegend=first, legendgroup=label, width=0.8,
                text=[f"{kind}{counted(p[1])}" for p in mine], textposition="inside", insidetextanchor="middle", textangle=0,
                textfont=dict(color=label_colors([p[1] for p in mine])),
                marker=dict(color=[microbatch_color(p[1]) for p in mine], line=dict(color=OUTLINE, width=1),
                            pattern=dict(shape=pattern, fgcolor="white", solidity=0.35, fillmode="overlay") if pattern else None),
                hovertemplate=f"%{{y}}: %{{text}}<extra>{SCHEDULE_NAMES[name]}</extra>"), row=row_at, col=1)
    fig.update_layout(barmode="overlay", bargap=0.2, uniformtext=dict(mode="hide", minsize=9))
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1], title=None)
    fig.update_xaxes(range=[0, length], dtick=max(1, length // 12))
    fig.update_xaxes(title="slots: one forward or backward each", row=len(layouts), col=1)  # the last panel's only
    notes = [f"{stages} stages, {micro} microbatches", "the same bubble, (S − 1) / (M + S − 1)", backend_note(trace)]
    if "1f1b" not in layouts:
        notes.insert(1, f"1F1B needs at least {stages} microbatches for {stages} stages")
        title = "GPipe at these settings; 1F1B cannot run them"
    else:
        kept = {name: in_flight(laid)[0] for name, (laid, _) in layouts.items()}
        title = "GPipe and 1F1B at these settings: the same idle share, " + (
            f"1F1B's first stage keeping {kept['1f1b']} microbatches' activations where GPipe's keeps {kept['gpipe']}"
            if kept["1f1b"] < kept["gpipe"] else
            f"and with as many microbatches as stages both keep all {kept['gpipe']} on the first stage (more "
            "microbatches: 1F1B keeps at most S)")
    return styled(fig, title, notes, height=BASE_PX + ROW_PX * stages * len(layouts))

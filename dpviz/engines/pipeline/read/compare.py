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
from dpviz.engines.pipeline.read.grid_fit import cell_labels, cell_px, panel_gap_px
from dpviz.analysis.wording import counted, plural, plural_possessive
from dpviz.engines.pipeline.read.schedule import label_colors, pass_groups, pass_legend, stage_label
from dpviz.figures.colors import IDLE_GREY, OUTLINE
from dpviz.figures.layout import styled
from dpviz.figures.presenting import CELL_TEXT
from dpviz.figures.sizes import BASE_TOP_PX, MARGIN
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace

# A stage's row in a panel, and the title block and the x axis: both grids of 4 stages on a projector's first screen,
# with the room between them that their ticks and the lower one's title take.
ROW_PX, BASE_PX = 30, 200


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
    # A grid of slots, each pass one: its idle share is the textbook's for that order, not this host's clock (the
    # Schedule tab's measured share); the run's own grid is in the order its step ran, the other in torch's.
    titles = [f"{SCHEDULE_NAMES[name]}{', as step ' + counted(step) + ' ran' if ran else ', torch’s order (not run)'}: "
              f"idle {percent(slot_share(laid))} of the slots, stage 1 keeps {plural(in_flight(laid)[0], 'microbatch')}"
              for name, (laid, ran) in layouts.items()]
    gap = sum(panel_gap_px(title) for title in titles[1:])
    height = round(BASE_PX + ROW_PX * stages * len(layouts) + gap)
    fig = make_subplots(rows=len(layouts), cols=1, subplot_titles=titles, shared_xaxes=False,  # styled() keeps the
                        vertical_spacing=gap / (height - BASE_TOP_PX - MARGIN["b"]))     # plot's height in pixels
    length = max(s + 1 for laid, _ in layouts.values() for row in laid for _, _, s in row)
    names = [stage_label(s) for s in range(stages)]
    for row_at, (name, (laid, _)) in enumerate(layouts.items(), start=1):
        first = row_at == 1
        fig.add_trace(go.Bar(y=names, x=[length] * stages, base=[0] * stages, orientation="h", name="idle (waiting)",
                             showlegend=first, legendgroup="idle", marker=dict(color=IDLE_GREY, line=dict(width=0)),
                             width=0.8, hoverinfo="skip"), row=row_at, col=1)
        passes = [(k, stage, m, s) for stage, row in enumerate(laid) for k, m, s in row]
        labels, size = cell_labels([(k, m) for k, _, m, _ in passes], [cell_px(1, length)] * len(passes))
        if first:
            pass_legend(fig, titled=False, row=row_at, col=1)  # two grids: the notes say it, not a title's row
        for group in pass_groups(micro):
            mine = [(p, text) for p, text in zip(passes, labels) if group.holds(p[0], p[2])]
            label = group.label
            fig.add_trace(go.Bar(
                y=[stage_label(p[1]) for p, _ in mine], x=[1] * len(mine), base=[p[3] for p, _ in mine], orientation="h",
                name=label, showlegend=False, legendgroup=label, width=0.8,
                text=[text for _, text in mine], textposition="inside", insidetextanchor="middle", textangle=0,
                textfont=dict(color=label_colors([p[2] for p, _ in mine]), size=size), meta=CELL_TEXT,
                marker=group.marker([p[2] for p, _ in mine], color=OUTLINE, width=1),
                customdata=[counted(p[2]) for p, _ in mine],  # the hover names the pass whether or not its cell does
                hovertemplate=f"%{{y}}: {label} of microbatch %{{customdata}}<extra>{SCHEDULE_NAMES[name]}</extra>"),
                row=row_at, col=1)
    fig.update_layout(barmode="overlay", bargap=0.2, uniformtext=dict(mode="hide", minsize=9))
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1], title=None)
    fig.update_xaxes(range=[0, length], dtick=max(1, length // 12))
    fig.update_xaxes(title="slots: one forward or backward each", row=len(layouts), col=1)  # the last panel's only
    notes = [f"{plural(stages, 'stage')}, {plural(micro, 'microbatch')}, each in its colour",
             "the same bubble, (S − 1) / (M + S − 1)", backend_note(trace)]
    if "1f1b" not in layouts:
        notes.insert(1, f"1F1B needs at least {plural(stages, 'microbatch')} for {plural(stages, 'stage')}")
        title = "GPipe at these settings; 1F1B cannot run them"
    else:
        kept = {name: in_flight(laid)[0] for name, (laid, _) in layouts.items()}
        title = "GPipe and 1F1B at these settings: the same idle share, " + (
            f"1F1B's first stage keeping {plural_possessive(kept['1f1b'], 'microbatch')} activations where GPipe's "
            f"keeps {kept['gpipe']}"
            if kept["1f1b"] < kept["gpipe"] else
            f"and with as many microbatches as stages both keep all {kept['gpipe']} on the first stage (more "
            "microbatches: 1F1B keeps at most S)")
    return styled(fig, title, notes, height=height)

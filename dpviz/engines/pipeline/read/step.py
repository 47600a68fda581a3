"""Step through a pipeline step: microbatches moving through the stages, one slot at a time.

    step_pipeline_figure(trace, batch=1)

The step laid out as the textbook's grid (bubble.slots: each stage's passes in the order it ran them, one slot
each); frame k shows every pass up to slot k, the passes of slot k outlined, and says what each stage did then
and what it handed on: a forward's activations to the next stage, a backward's gradients to the stage before,
with their bytes (facts "sent": every send of a step carries the same bytes, the microbatches being equal).
"""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.analysis.wording import counted, human_bytes
from dpviz.engines.dp.read.step import animated
from dpviz.engines.pipeline.read.bubble import slots
from dpviz.engines.pipeline.read.grid_fit import cell_labels, cell_px
from dpviz.engines.pipeline.read.schedule import (KINDS, label_colors, pass_groups, schedule_words,
                                                  stage_label, stopped_figure)
from dpviz.figures.colors import IDLE_GREY, OUTLINE
from dpviz.figures.arguments import check_batch
from dpviz.figures.layout import styled
from dpviz.figures.presenting import CELL_TEXT
from dpviz.figures.sizes import TITLE_SIZE
from dpviz.figures.text_fit import wrap
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace

ROW_PX, BASE_PX = 60, 330


def send_bytes(trace: Trace, step: int) -> dict[tuple[int, str], int]:
    """(stage, "send_activations" | "send_gradients") -> the bytes of one send in `step`, from facts "sent"."""
    out = {}
    for stage, rows in enumerate(trace.facts.get("sent") or []):
        for row_step, phase, sends, size in rows or []:
            if row_step == step and sends:
                out[stage, phase] = size // sends
    return out


def _said(trace: Trace, step: int, laid, slot: int) -> str:
    """What each stage did in `slot`, and what it handed on."""
    sizes, last = send_bytes(trace, step), len(laid) - 1
    words = []
    for stage, row in enumerate(laid):
        for kind, micro, start in row:
            if start != slot:
                continue
            what = f"{stage_label(stage)} {KINDS[kind][0]} of microbatch {counted(micro)}"
            if kind == "F" and stage < last and (stage, "send_activations") in sizes:
                what += f", {human_bytes(sizes[stage, 'send_activations'])} of activations to {stage_label(stage + 1)}"
            elif kind == "B" and stage > 0 and (stage, "send_gradients") in sizes:
                what += f", {human_bytes(sizes[stage, 'send_gradients'])} of gradients to {stage_label(stage - 1)}"
            words.append(what)
    return "; ".join(words) or "every stage waits"


def step_pipeline_figure(trace: Trace, batch: int = 0) -> go.Figure:
    check_batch(trace, batch)
    laid = slots(trace, batch)
    if laid is None:  # a step that did not end: what it ran, and why it stopped
        return stopped_figure(trace, batch)
    stages = len(laid)
    length = max(s + 1 for row in laid for _, _, s in row)
    names = [stage_label(s) for s in range(stages)]
    passes = sorted(((kind, stage, m, s) for stage, row in enumerate(laid) for kind, m, s in row), key=lambda p: p[3])
    # Each pass's label where its slot holds it on the narrowest chart (grid_fit), the same in every frame.
    texts, size = cell_labels([(p[0], p[2]) for p in passes], [cell_px(1, length)] * len(passes))
    label_of = dict(zip(passes, texts))

    def bars(slot: int) -> list[go.Bar]:
        shown = [p for p in passes if p[3] <= slot]
        return [go.Bar(y=names, x=[length] * stages, base=[0] * stages, orientation="h", name="idle (waiting)",
                       marker=dict(color=IDLE_GREY, line=dict(width=0)), width=0.8, hoverinfo="skip")] + [
            go.Bar(y=[stage_label(p[1]) for p in mine], x=[1] * len(mine), base=[p[3] for p in mine], orientation="h",
                   name=label, width=0.8, text=[label_of[p] for p in mine], textposition="inside",
                   insidetextanchor="middle", textangle=0, textfont=dict(color=label_colors([p[2] for p in mine]), size=size),
                   meta=CELL_TEXT, customdata=[counted(p[2]) for p in mine],
                   marker=dict(group.marker([p[2] for p in mine],
                                            color=[OUTLINE if p[3] < slot else "#000000" for p in mine],
                                            width=[1 if p[3] < slot else 4 for p in mine]), opacity=1.0),
                   hovertemplate=f"%{{y}}: {label} of microbatch %{{customdata}}<extra></extra>")
            for group in pass_groups(trace.config.microbatches)
            for mine in [[p for p in shown if group.holds(p[0], p[2])]] for label in [group.label]]

    fig = go.Figure(data=bars(0))
    frames, titles = [], []
    for slot in range(length):
        title = wrap(f"Slot {slot + 1} of {length}: {_said(trace, batch, laid, slot)}", TITLE_SIZE)
        frames.append(go.Frame(data=bars(slot), name=f"{slot + 1}", layout=dict(title=dict(text=title))))
        titles.append(title)
    fig.update_layout(barmode="overlay", bargap=0.2, uniformtext=dict(mode="hide", minsize=9), showlegend=False,
                      xaxis=dict(title="slots: one forward or backward each", range=[0, length], dtick=max(1, length // 12)),
                      yaxis=dict(categoryorder="array", categoryarray=names[::-1], title=None))
    styled(fig, titles[0], [schedule_words(trace), f"step {counted(batch)}", backend_note(trace)],
           height=BASE_PX + ROW_PX * stages)
    return animated(fig, frames, titles, "slot ")

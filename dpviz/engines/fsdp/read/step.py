"""Step through one sharded module under FSDP: what each rank holds of its parameters, phase by phase.

    step_fsdp_figure(trace, batch=0)              # the largest sharded module (the one that matters most)
    step_fsdp_figure(trace, batch=0, module=2)    # the third module FSDP sharded

One frame for the start of the step, then one per span the run recorded for the module in that step, in the order
they began on rank 0 (all-gather, its forward, reshard; training: all-gather again in backward, reduce-scatter),
then the optimizer step. Each frame draws per rank two bars across the module's parameters, cut into one segment
per rank as FSDP cuts dim 0 (rank 0's rows first; each segment as long as the elements that rank held of the
module, from the trace's facts "modules"): above, the parameters the rank holds at that moment (its own shard, or
whole while gathered); below, its gradient (whole but from its own rows only, then its shard of the sum).
"""
from __future__ import annotations

from fractions import Fraction

import pandas as pd
import plotly.graph_objects as go

from dpviz.analysis.wording import device_list
from dpviz.echo import plotly_text
from dpviz.figures.colors import GUIDE, OUTLINE, device_color, with_alpha
from dpviz.engines.dp.read.step import animated
from dpviz.figures.arguments import check_batch
from dpviz.figures.layout import styled
from dpviz.figures.sizes import TITLE_SIZE
from dpviz.figures.text_fit import wrap
from dpviz.figures.trace_words import NAME_LIMIT
from dpviz.trace import Trace

# What a rank holds of the module after each phase: (parameters, gradient). "shard": its own segment;
# "whole": every segment; "updated": its segment, just stepped; "mine": the gradient whole, from its rows only.
HOLDS = {
    "start": ("shard", None),
    "gather": ("whole", None),
    "compute": ("whole", None),
    "reshard": ("shard", None),
    "gather_backward": ("whole", "mine"),
    "reduce_scatter": ("shard", "shard"),
    "step": ("updated", "shard"),
}
PHASE_NOUN = "phase"  # what the title and the slider count, from 1: the frames, one per phase
PARAMS_Y, GRADS_Y, BAR_H = -0.2, 0.2, 0.32  # within a rank's lane: its parameters above, its gradient below
LANE_PX, PLOT_BASE_PX = 110, 60


def layer_shards(trace: Trace, module: int) -> tuple[str, list[int]]:
    """(module name, elements each rank held of it), from the facts each rank reported; ValueError when the
    trace does not say (a trace recorded before FSDP's modules were, or a rank that never reported)."""
    ranks = trace.facts.get("modules") or []
    if not ranks or None in ranks:
        raise ValueError("this trace does not record what each rank held of each sharded module")
    mine = [next((m for m in rank if m["index"] == module), None) for rank in ranks]
    if None in mine:
        raise ValueError(f"sharded module {module + 1:,} is not in this trace")
    return mine[0]["name"] or "the root module", [m["held"] for m in mine]


def largest_module(trace: Trace) -> int:
    """The index of the module with the most parameter elements (the first of equals)."""
    ranks = trace.facts.get("modules") or []
    if not ranks or None in ranks:
        raise ValueError("this trace does not record what each rank held of each sharded module")
    sizes = {m["index"]: sum(rank[i]["held"] for rank in ranks) for i, m in enumerate(ranks[0])}
    return max(sizes, key=lambda index: (sizes[index], -index))


def prepare_layer_steps(trace: Trace, batch: int, module: int) -> pd.DataFrame:
    """One row per frame: the phase, its start on rank 0 (ms; None for the opening), and per rank the elements
    of the module's parameters and of its gradient it holds then (lists, rank by rank)."""
    check_batch(trace, batch)
    _, shards = layer_shards(trace, module)
    whole = sum(shards)
    spans = sorted((s for s in trace.spans_of(batch) if s.group == module and s.lane == 0), key=lambda s: s.start)
    steps = [s for s in trace.spans_of(batch, "step") if s.lane == 0]
    rows = [("start", None, None)] + [(s.phase, s.start * 1e3, s.thread) for s in spans + steps[:1]]
    records = []
    for frame, (phase, start_ms, thread) in enumerate(rows, start=1):
        params, grads = HOLDS.get(phase, ("shard", None))
        held = [whole if params == "whole" else shard for shard in shards]
        grad = [0 if grads is None else whole if grads == "mine" else shard for shard in shards]
        records.append((frame, phase, start_ms, thread, params, grads, held, grad))
    return pd.DataFrame.from_records(records, columns=["frame", "phase", "start_ms", "thread", "params", "grads",
                                                      "held", "gradient"])


def share_words(shards: list[int]) -> str:
    """'1/2' for rank 0's part of the module's elements ('about 26%' where it is no simple part), and the ranks whose
    shard holds no real row: FSDP2 cuts dim 0 as torch.chunk does and pads it to a multiple of the ranks, so with
    fewer rows than ranks the last ones allocate a shard of padding only."""
    share = Fraction(shards[0], sum(shards) or 1)
    words = f"{share.numerator}/{share.denominator}" if share.numerator == 1 else f"about {float(share):.0%}"
    empty = [rank for rank, shard in enumerate(shards) if shard == 0]
    if empty:  # device_list counts runs as the figures do; these lanes are ranks, not GPUs
        ranks = device_list(empty).replace("GPUs", "ranks").replace("GPU", "rank")
        words += f"; {ranks} {'holds' if len(empty) == 1 else 'hold'} padding only"
    return words


def _words(trace: Trace, row, name: str, shards: list[int]) -> str:
    whole = sum(shards)
    if row.phase == "start":
        return (f"each rank holds only its shard of {name}: {shards[0]:,} of its {whole:,} elements on rank 0 "
                f"({share_words(shards)}), its own rows of dim 0")
    if row.phase == "gather":
        return (f"all-gather: each rank sends its shard and receives the others'; every rank now holds {name} whole, "
                f"{whole:,} elements, for its forward")
    if row.phase == "compute":
        return f"forward: {name} runs on every rank on its whole parameters, each rank on its own rows"
    if row.phase == "reshard":
        return f"reshard: the gathered parameters are freed; each rank keeps its own shard again (rank 0: {share_words(shards)})"
    if row.phase == "gather_backward":
        return (f"all-gather again in backward: every rank holds {name} whole once more, and makes a whole gradient "
                "from its own rows")
    if row.phase == "reduce_scatter":
        text = ("reduce-scatter: the gradients are summed over the ranks (a mean), each rank keeping its shard of "
                "the sum, and the parameters resharded")
        if row.thread and "all-reduce" in row.thread:  # what the run's thread says it ran
            text += "; gloo has none: it ran as an all-reduce"
        return text
    if row.phase == "step":
        return (f"optimizer step: each rank updates its own shard of {name} with its shard of the gradient and of "
                "the optimizer state; none holds the whole layer now")
    return trace.vocabulary.phase(row.phase).hover


def _title(trace: Trace, batch: int, row, frames: int, name: str, shards: list[int]) -> str:
    label = "start of the step" if row.phase == "start" else trace.vocabulary.phase(row.phase).label
    # "phase 3 of 7", as the slider counts its frames: never a bare "3 of 7" beside "sharded module 3 of 7"
    head = f"Step {batch + 1:,} · {plotly_text(name, NAME_LIMIT)} · {PHASE_NOUN} {row.frame} of {frames}: {label}"
    words = _words(trace, row, plotly_text(name, NAME_LIMIT), shards)
    return f"{head}<br>{wrap(words[0].upper() + words[1:], TITLE_SIZE)}"


def _segments(shards: list[int]) -> list[int]:
    starts, at = [], 0
    for shard in shards:
        starts.append(at)
        at += shard
    return starts


def _frame_data(row, shards: list[int], trace: Trace) -> list[go.Bar]:
    """The traces of one frame, always the same ones in the same order (an animation swaps their data)."""
    ranks, starts = len(shards), _segments(shards)
    own_x, own_base, own_y, own_color = [], [], [], []
    got_x, got_base, got_y, got_color = [], [], [], []
    for r in range(ranks):
        own_x.append(shards[r]), own_base.append(starts[r]), own_y.append(r + PARAMS_Y), own_color.append(device_color(r))
        for o in range(ranks):
            if o != r:  # another rank's segment: held only while gathered
                got_x.append(shards[o] if row.params == "whole" else None)  # None: no bar, not a hairline
                got_base.append(starts[o]), got_y.append(r + PARAMS_Y), got_color.append(with_alpha(device_color(o), 0.45))
    grad_x, grad_base, grad_y = [], [], []
    for r in range(ranks):
        if row.grads == "mine":
            grad_x.append(sum(shards)), grad_base.append(0)
        else:
            grad_x.append(shards[r] if row.grads == "shard" else None), grad_base.append(starts[r])
        grad_y.append(r + GRADS_Y)
    updated = row.params == "updated"
    held = [sum(shards) if row.params == "whole" else s for s in shards]
    return [
        go.Bar(x=own_x, base=own_base, y=own_y, marker=dict(color=own_color, line=dict(color=OUTLINE, width=1),
                                                             pattern=dict(shape="x" if updated else "", fgcolor="white")),
               name="its shard, updated" if updated else "its own shard",
               customdata=[[r, h, sum(shards)] for r, h in enumerate(held)],
               hovertemplate="rank %{customdata[0]} holds %{customdata[1]:,} of %{customdata[2]:,} elements<extra></extra>"),
        go.Bar(x=got_x, base=got_base, y=got_y, marker=dict(color=got_color, line=dict(color=OUTLINE, width=1),
                                                             pattern=dict(shape="/", fgcolor=OUTLINE)),
               name="gathered from the other ranks", hoverinfo="skip"),
        go.Bar(x=grad_x, base=grad_base, y=grad_y,
               marker=dict(color=[device_color(r) for r in range(ranks)], line=dict(color=OUTLINE, width=1),
                           pattern=dict(shape="." if row.grads == "mine" else "-", fgcolor="white")),
               name="gradient: whole, from its own rows" if row.grads == "mine" else "gradient: its shard of the sum",
               hoverinfo="skip"),
    ]


def plot_layer_steps(table: pd.DataFrame, shards: list[int], trace: Trace, titles: list[str],
                     notes: list[str]) -> go.Figure:
    """Per rank, its parameters' bar over its gradient's, one frame per row of `table`, with play and a slider."""
    ranks, whole = len(shards), sum(shards)
    rows = list(table.itertuples())
    fig = go.Figure(data=_frame_data(rows[0], shards, trace))
    # Every segment's outline, in every frame: what a rank does not hold is an empty box, not nothing.
    for r in range(ranks):
        for y in (r + PARAMS_Y, r + GRADS_Y):
            fig.add_shape(type="rect", x0=0, x1=whole, y0=y - BAR_H / 2, y1=y + BAR_H / 2,
                          line=dict(color=GUIDE, width=1, dash="dot"), layer="below")
        for at in _segments(shards)[1:]:
            fig.add_shape(type="line", x0=at, x1=at, y0=r + PARAMS_Y - BAR_H / 2, y1=r + GRADS_Y + BAR_H / 2,
                          line=dict(color=GUIDE, width=1, dash="dot"))
    fig.update_traces(orientation="h", width=BAR_H, showlegend=False)
    fig.update_layout(barmode="overlay", bargap=0, hovermode="closest")
    ticks = [y for r in range(ranks) for y in (r + PARAMS_Y, r + GRADS_Y)]
    labels = [text for r in range(ranks) for text in (f"{trace.vocabulary.lane_name(r)}: parameters", "gradient")]
    fig.update_yaxes(autorange=False, range=[ranks - 0.5, -0.5], tickmode="array", tickvals=ticks, ticktext=labels,
                     showgrid=False, zeroline=False)
    fig.update_xaxes(range=[0, whole], title_text=f"its {whole:,} parameter elements: one shard per rank (dim 0)", showgrid=False, zeroline=False)
    styled(fig, titles[0], notes, height=PLOT_BASE_PX + LANE_PX * ranks + 160)
    frames = [go.Frame(name=str(row.frame), data=_frame_data(row, shards, trace), traces=[0, 1, 2],
                       layout=go.Layout(title=dict(text=title))) for row, title in zip(rows, titles)]
    fig = animated(fig, frames, titles, f"{PHASE_NOUN} ")
    fig.layout.sliders[0].currentvalue.suffix = f" of {len(frames):,}"  # "phase 3 of 7", as the title says it
    return fig


def step_fsdp_figure(trace: Trace, batch: int = 0, module: int | None = None) -> go.Figure:
    """One sharded module through `batch`'s step, one frame per phase FSDP recorded for it."""
    ranks = trace.facts.get("modules") or []
    if not ranks or None in ranks:  # a trace from before modules were recorded, or a rank that never reported
        check_batch(trace, batch)
        fig = go.Figure()
        fig.add_annotation(text="nothing to step through: the trace does not say what each rank held of each "
                                "sharded module", x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False)
        fig.update_xaxes(visible=False), fig.update_yaxes(visible=False)
        why = "a rank stopped before it reported" if ranks else "recorded before dpviz kept FSDP's modules"
        return styled(fig, f"Step {batch + 1:,}: no sharded module to step through", [why], height=300)
    module = largest_module(trace) if module is None else module
    name, shards = layer_shards(trace, module)
    table = prepare_layer_steps(trace, batch, module)
    titles = [_title(trace, batch, row, len(table), name, shards) for row in table.itertuples()]
    modules = len(trace.facts["modules"][0])
    which = f"sharded module {module + 1:,} of {modules:,} ({plotly_text(name, NAME_LIMIT)})"  # the timeline's count
    notes = [f"{which}, the largest" if module == largest_module(trace) else which,
             "bars: what each rank holds of the module's parameters (above) and of the gradient it makes in this step "
             "(below); a dotted box: what it does not hold",
             "the frames follow the spans rank 0 recorded, in the order they began"]
    return plot_layer_steps(table, shards, trace, titles, notes)

"""A step of tensor parallelism in the columns every engine shares (dpviz.analysis.one_step), in DDP's frame of ranks.

Every rank reads the whole batch. Forward: every layer on every rank, each rank with its 1/W of each cut Linear;
each row-wise Linear's partial outputs all-reduced (Megatron's g). Backward: each column-wise input's gradient
all-reduced (f). Optimizer step: each rank steps its slices and the whole parts; nothing moves. Bytes are what each
rank handed its all-reduces in the step (facts["moved"]): the activations', not the parameters'.
"""
from __future__ import annotations

import dataclasses

import plotly.graph_objects as go

from dpviz.analysis.one_step import Cell, OneStep, idle, update_cell
from dpviz.analysis.wording import human_bytes, numbered, plural
from dpviz.analysis.batch_facts import batches_planned
from dpviz.catalogue import MODEL_SPECS
from dpviz.engines.ddp.read.one_step import held, one_step_ranks
from dpviz.engines.tp.read.text import modules
from dpviz.figures.one_step import one_step_figure
from dpviz.trace import Trace

# What the ranks wrote down handing each collective (facts["moved"]) -> (its column, its name, the legend's kind)
COLLECTIVES = {
    "all-reduce (forward)": ("forward", "all-reduce", "all-reduce"),
    "all-reduce (backward)": ("backward", "all-reduce", "all-reduce"),
}
HOVERS = {
    "all-reduce (forward)": "all-reduce in forward (g): each row-wise Linear's partial outputs summed; the next layer "
                            "waits for it",
    "all-reduce (backward)": "all-reduce in backward (f): the gradient of each column-wise input summed; the layer "
                             "before waits for it",
}


def _calls(trace: Trace, step: int, phase: str, rank: int) -> int:
    return sum(1 for s in trace.spans_of(step, phase) if s.lane == rank)


def tp_cells(trace: Trace, step: int, rank: int, rows: int) -> dict[str, Cell]:
    """What a tensor-parallel rank holds and does in each part of a step."""
    config, name, ranks = trace.config, trace.vocabulary.lane_name(rank), len(trace.lanes)
    mine = held(trace, rank)
    params = (mine.get("parameters") or {}).get("bytes")
    cut = len([m for m in modules(trace) if m["style"] in ("colwise", "rowwise")])
    forward = _calls(trace, step, "allreduce_forward", rank)
    cells = {
        "input": Cell((plural(rows, "row"), "the whole batch"), hover=f"{name} reads the same rows as every rank"),
        # Its slices in one line (the title says of what: 1/W of each cut weight), so a box holds three lines and four
        # ranks' One step fits a projector's first screen.
        "forward": Cell((f"its 1/{ranks} slices", f"{forward} all-reduce{'s' if forward != 1 else ''}"),
                        hover=f"{name} holds 1/{ranks} of each of the {plural(cut, 'cut Linear')}"
                              + (f" ({human_bytes(params)} of parameters, the whole parts included)" if params else "")
                              + "; every row-wise one's partial outputs are all-reduced before the next layer runs"),
    }
    if not config.train:
        cells["backward"] = idle("forward only: turn training on to see the gradients' all-reduces")
        cells["update"] = idle("forward only")
        return cells
    backward = _calls(trace, step, "allreduce_backward", rank)
    grads = (mine.get("gradients") or {}).get("bytes")
    cells["backward"] = Cell((f"grads of its 1/{ranks}", f"{backward} all-reduce{'s' if backward != 1 else ''}"),
                             hover=f"{name} computes the gradients of its own slices"
                                   + (f" ({human_bytes(grads)})" if grads else "")
                                   + "; each column-wise input's gradient is all-reduced (none where the input is the "
                                     "data, which needs no gradient)")
    state = (mine.get("optimizer state") or {}).get("bytes")
    cells["update"] = update_cell(trace, rank, f"its 1/{ranks} of each cut weight and the whole parts", params, state)
    return cells


def heads_held(trace: Trace) -> str | None:
    """'2 of the 8 attention heads': what each rank computes of a catalogue model's attention (q, k and v cut column-wise
    hand it whole heads); None for a model without attention, or one of the user's, whose heads dpviz does not know."""
    spec = MODEL_SPECS.get(trace.config.model)
    heads, ranks = (spec.tensor.heads if spec is not None else 0), len(trace.lanes)
    if not heads or heads % ranks:
        return None
    return f"{heads // ranks} of the {heads} attention heads"


def one_step_tp(trace: Trace, step: int) -> OneStep:
    shown = one_step_ranks(trace, step, COLLECTIVES, tp_cells, HOVERS,
                           handed_words="the activations each rank handed the all-reduce (not the parameters)")
    # What moves between the ranks is each column's heading: the title says what each rank holds, its heads first
    # (the lesson of cutting q, k and v), where the model has them.
    heads = heads_held(trace)
    title = (f"{numbered(step, batches_planned(trace), trace.spec.unit).capitalize()}: every rank the whole batch"
             + (f", {heads}" if heads else "") + f" and 1/{len(trace.lanes)} of each cut weight")
    return dataclasses.replace(shown, title=title)


def one_step_tp_figure(trace: Trace, step: int) -> go.Figure:
    """Tensor parallelism's step, drawn as every engine's is."""
    return one_step_figure(one_step_tp(trace, step))

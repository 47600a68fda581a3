"""A pipeline's step in the columns every engine shares (dpviz.analysis.one_step): a row per stage.

Input: the first stage takes the batch and cuts it into microbatches; the last takes the labels. Forward: each
stage runs its own layers on every microbatch and sends its activations to the next stage. Backward: each sends
the gradient of its input back to the stage before. Optimizer step: each stage steps its own layers; no parameter
ever moves. Bytes are what each stage's sends carried in the step (facts["sent"]), its microbatches summed.
"""
from __future__ import annotations

import plotly.graph_objects as go

from dpviz.analysis.one_step import (
    BACK, NEXT, Arrow, Cell, OneStep, bytes_note, failed_column, idle, step_heading, stopped, update_cell,
)
from dpviz.analysis.wording import plural
from dpviz.engines.ddp.read.one_step import held
from dpviz.engines.pipeline.read.traffic import sent_bytes
from dpviz.figures.one_step import one_step_figure
from dpviz.figures.arguments import check_batch
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace

SENDS = {"send_activations": ("forward", "activations", NEXT), "send_gradients": ("backward", "gradients", BACK)}
COLUMN_OF = {"load": "input", "labels": "input", "receive_activations": "forward", "forward": "forward",
             "send_activations": "forward", "loss": "forward", "receive_gradients": "backward", "backward": "backward",
             "send_gradients": "backward", "step": "update"}
HOVERS = {"send_activations": "each stage sends every microbatch's activations to the next stage",
          "send_gradients": "each stage sends the gradient of every microbatch's input back to the stage before"}


def _layers(trace: Trace, stage: int) -> str:
    names = ((trace.facts.get("layers") or [])[stage:stage + 1] or [[]])[0] or []
    return names[0] if len(names) == 1 else plural(len(names), "layer")


def one_step_pipeline(trace: Trace, step: int) -> OneStep:
    check_batch(trace, step)
    config, batch = trace.config, trace.batches[step]
    lanes = [lane.id for lane in trace.lanes]
    first, last, micro = lanes[0], lanes[-1], config.microbatches
    trained = config.train  # always: torch's schedules run each microbatch's forward and backward
    cells: dict[tuple[int, str], Cell] = {}
    for stage in lanes:
        name = trace.vocabulary.lane_name(stage)
        if stage == first:
            cells[(stage, "input")] = Cell((plural(batch.rows, "row"), f"{micro} × {batch.rows // max(micro, 1)}"),
                                           hover=f"{name} takes the batch and cuts it into {plural(micro, 'microbatch')}")
        elif stage == last and trained:
            cells[(stage, "input")] = Cell(("labels",), hover=f"{name} takes the labels, for the loss")
        else:
            cells[(stage, "input")] = idle(f"{name} takes nothing from the data: its input is the stage before's output")
        cells[(stage, "forward")] = Cell((_layers(trace, stage), f"forward × {micro}") + (("loss",) if stage == last and trained else ()),
                                         hover=f"{name} runs its own layers on each microbatch")
        cells[(stage, "backward")] = Cell(("backward", f"× {micro}"), hover=f"{name} backpropagates each microbatch through its layers")
        mine = held(trace, stage)
        params = (mine.get("parameters") or {}).get("bytes")
        cells[(stage, "update")] = (update_cell(trace, stage, "only its own layers' parameters", params,
                                                (mine.get("optimizer state") or {}).get("bytes"))
                                    if params else idle(f"{name}'s layers have no parameters"))
    sent = sent_bytes(trace)
    arrows = []
    for phase, (column, label, shape) in SENDS.items():
        out = {stage: sent[(step, stage, phase)][1] for stage in lanes if (step, stage, phase) in sent}
        if out:
            # Each box's bytes are what its stage sent, as the note says: none received, or the last stage's forward
            # box would show the activations it took in and the first's backward box the gradients, sending none.
            # The arrows still run from each sender to its neighbour.
            arrows.append(Arrow(column, label, "send/receive", shape, out, {}, hover=HOVERS[phase]))
    failed = failed_column(trace, step, COLUMN_OF)
    cells = stopped(cells, failed)
    title = (f"{step_heading(trace, step)}: each stage its own layers; between neighbours, "
             + (" and ".join(a.name for a in arrows) or "nothing"))
    notes = (backend_note(trace), f"{plural(micro, 'microbatch')} through {plural(len(lanes), 'stage')}",
             bytes_note(trace, step, "what each stage sent, its microbatches summed"))
    return OneStep(title, tuple(trace.vocabulary.lane_name(s) for s in lanes), tuple(lanes), cells, tuple(arrows),
                   notes, failed)


def one_step_pipeline_figure(trace: Trace, step: int) -> go.Figure:
    """A pipeline's step, drawn as every engine's is."""
    return one_step_figure(one_step_pipeline(trace, step))

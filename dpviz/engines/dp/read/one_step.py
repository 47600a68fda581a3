"""DataParallel's step in the columns every engine shares (dpviz.analysis.one_step).

Input: torch.chunk's chunks scattered from GPU 0 (chunk 0 stays). Forward: the module replicated from GPU 0 to the
others, each replica's output gathered back to GPU 0, the loss computed there. Backward: the gather's backward
sends each replica its output's gradient, the replicate's backward sums every replica's parameter gradients into
GPU 0. Optimizer step: GPU 0 alone, on every parameter, with the optimizer's state; the replicas are gone. Bytes are
DataParallel's copies (dpviz.engines.dp.read.traffic), in the step shown; each move in its kind's colour (the
gradients' sum a reduce, the output's gradient a scatter), as Compare and the Timeline draw it."""
from __future__ import annotations

from collections import defaultdict

import plotly.graph_objects as go

from dpviz.engines.dp.read.flow_links import failed_replica
from dpviz.engines.dp.read.scatter_pieces import idle_reasons
from dpviz.engines.dp.read.traffic import dp_step_traffic
from dpviz.analysis.one_step import (
    HUB, Arrow, Cell, OneStep, bytes_note, failed_column, idle, step_heading, stopped, update_cell,
)
from dpviz.analysis.traffic import ledger
from dpviz.analysis.wording import human_bytes, plural
from dpviz.figures.one_step import one_step_figure
from dpviz.figures.arguments import check_batch
from dpviz.figures.trace_words import backend_note
from dpviz.trace import Trace

# DataParallel's copies, by the name dp_traffic gives them: (column, the arrow's name). Each arrow takes the kind
# its Moves name (the legend's colour).
MOVES = {
    "input chunk": ("input", "scatter"),
    "parameter copy": ("forward", "replicate"),
    "output gathered": ("forward", "gather"),
    # each name one line in the narrowest chart's column: two moves of two lines each made the headings five lines
    "output gradient": ("backward", "output grad"),
    "gradient sum": ("backward", "grad sum"),
}
COLUMN_OF = {"scatter": "input", "replicate": "forward", "apply": "forward", "forward": "forward", "gather": "forward",
             "loss": "forward", "backward": "backward", "reduce": "backward", "step": "update"}


def one_step_dp(trace: Trace, step: int) -> OneStep:
    check_batch(trace, step)
    config, batch = trace.config, trace.batches[step]
    lanes = [lane.id for lane in trace.lanes]
    home = trace.output_device
    rows = {span.lane: span.rows for span in trace.replicas(step) if span.lane is not None}
    trained = config.train and bool(trace.spans_of(step, "backward"))
    gathered, lost = _gathered(trace, step), bool(trace.spans_of(step, "loss"))
    idle_why = idle_reasons(trace, step)
    cells: dict[tuple[int, str], Cell] = {}
    for lane in lanes:
        name = trace.vocabulary.lane_name(lane)
        mine = rows.get(lane)
        if mine is None:
            why = f"{name} ran no replica this step: {idle_why.get(lane, 'no replica ran there')}"
            for column in ("input", "forward", "backward", "update"):
                cells[(lane, column)] = idle(why)
            continue
        at_home = lane == home
        cells[(lane, "input")] = Cell(
            (plural(batch.rows, "row"), f"keeps {mine}") if at_home else (plural(mine, "row"),),
            hover=f"{name} {'holds the batch and keeps the first chunk' if at_home else 'receives its chunk'}: "
                  f"{plural(mine, 'row')}")
        cells[(lane, "forward")] = Cell(
            ((f"forward {mine}",) + (gathered[0] if gathered else ()) + (("loss",) if lost else ()))
            if at_home else ("replica", f"forward {mine}"),
            hover=(f"{name} runs the module itself on its {plural(mine, 'row')}"
                   + (f", then holds every replica's output ({gathered[1]})" if gathered else
                      ": no gather ran, so no output came back" if failed_replica(trace, step) else "")
                   + (" and computes the loss" if lost else "")) if at_home else
                  f"{name} runs a copy of the module made this step on its {plural(mine, 'row')}",
            # a box of two lines on a projector (eight GPUs): its rows and what it gathers, the loss in its hover
            brief=(f"fwd {mine}",) + (gathered[0] if gathered else ()) if at_home else None)
        if not trained:
            cells[(lane, "backward")] = idle("forward only: turn training on to see the backward")
            cells[(lane, "update")] = idle("forward only")
            continue
        cells[(lane, "backward")] = Cell(("backward", "adds grads") if at_home else ("backward",),
                                         hover=f"{name} backpropagates through its chunk"
                                               + (", then adds every replica's gradients" if at_home else ""),
                                         brief=("adds grads",) if at_home else None)
        cells[(lane, "update")] = (_update(trace, lane) if at_home
                                   else idle("the replica is dropped after the step: nothing to update"))
    sent: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    received: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    kinds: dict[str, str] = {}
    for move in dp_step_traffic(trace, step):
        if move.what in MOVES:
            kinds[move.what] = move.kind
            if move.sent:
                sent[move.what][move.lane] += move.sent
            if move.received:
                received[move.what][move.lane] += move.received
    arrows = tuple(Arrow(column, name, kinds[what], HUB, dict(sent[what]), dict(received[what]),
                         hover=_hover(what, trace))
                   for what, (column, name) in MOVES.items() if sent[what] or received[what])
    failed = failed_column(trace, step, COLUMN_OF)
    cells = stopped(cells, failed)
    raised = failed_replica(trace, step)  # DataParallel names the one replica that raised: only its box is marked
    failed_lanes = (raised.lane,) if failed == "forward" and raised is not None and raised.lane is not None else None
    into = sum(a.sent.get(home, 0) for a in arrows)
    heading = step_heading(trace, step)
    title = (f"{heading}: every copy leaves from GPU 0 and comes back to it" if len(rows) > 1
             else f"{heading}: one GPU, nothing moves")
    notes = (backend_note(trace), f"GPU 0 sends {human_bytes(into)} this step" if into else "",
             bytes_note(trace, step, "the tensors copied"))
    return OneStep(title, tuple(trace.vocabulary.lane_name(l) for l in lanes), tuple(lanes), cells, arrows,
                   tuple(n for n in notes if n), failed, failed_lanes)


def _gathered(trace: Trace, step: int) -> tuple[tuple[str, ...], str] | None:
    """What the step's gather joined on the output device, as the box's lines and in words, from the replicas'
    outputs the trace recorded: their rows along the batch's dim, or one element per replica when each returned a
    0-dim tensor (gather unsqueezes them into a vector). None when no gather ran (one device, or a replica raised)."""
    if not trace.spans_of(step, "gather"):
        return None
    outputs = [s.output_shape for s in trace.replicas(step) if s.lane is not None and s.output_shape is not None]
    if outputs and all(len(shape) == 0 for shape in outputs):
        scalars = plural(len(outputs), "scalar")
        return ("gathers", scalars), f"{scalars}, one per replica, as a vector"  # one line is too wide for a box
    dim = trace.dim
    rows = sum(shape[dim] for shape in outputs if len(shape) > dim)
    return (f"gathers {rows}",), plural(rows, "row")


def _update(trace: Trace, lane: int) -> Cell:
    """GPU 0's step, its bytes from the memory ledger (none on a real GPU's measured figure: then words alone): the
    parameters it steps are those with gradients (the ledger's parameters count the buffers too)."""
    stepped, state = ledger(trace, lane, "gradients"), ledger(trace, lane, "optimizer state")
    return update_cell(trace, lane, "the only copy of the parameters that outlives the step", stepped,
                       0 if state is None and stepped is not None else state)  # a ledger without state: none kept


def _hover(what: str, trace: Trace) -> str:
    return {"input chunk": "scatter: torch.chunk's chunks copied from GPU 0 to each GPU (chunk 0 stays)",
            "parameter copy": "replicate: every parameter and buffer copied from GPU 0 to each replica, every step",
            "output gathered": "gather: each replica's output copied to GPU 0",
            "output gradient": "the gather's backward: each replica's slice of the output's gradient, from GPU 0",
            "gradient sum": "the replicate's backward: each replica's parameter gradients summed into GPU 0"}[what]


def one_step_dp_figure(trace: Trace, step: int) -> go.Figure:
    """DataParallel's step, drawn as every engine's is."""
    return one_step_figure(one_step_dp(trace, step))

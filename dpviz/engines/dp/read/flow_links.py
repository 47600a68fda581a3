"""What one DataParallel batch moved, as nodes and links in the order DataParallel ran its steps.

    nodes, links = flow_links(trace, batch)          # lists of Node and Link, what the figure draws from
    nodes, links = prepare_flow_links(trace, batch)  # the same as two DataFrames, for tables and tests

Steps are the trace's own phases, in the vocabulary's pipeline order: scatter (the batch cut into
one chunk per device), replicate (GPU 0's parameters copied to every replica, on every batch), the
forwards, gather (the outputs copied back to the output device) and, training, loss, backward (the
output gradient split back with the forward's chunk sizes), the gradients' sum on device_ids[0]
and the step. A link carries rows of the batch (`rows`) or, for replicate and the sum, a whole
model's worth of parameters or gradients (`rows` is 0: one copy each, whatever its chunk).

Data only: flow_draw.py draws it, flow.py words it. Plain tuples, not DataFrames: a run's first chart
is its flow, and pandas takes longer to import than the flow takes to draw.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from dpviz.echo import plotly_text
from dpviz.analysis.batch_facts import batch_spans, called_without_rows
from dpviz.trace import Span, Trace
from dpviz.analysis.wording import human_bytes, plural
from dpviz.figures.arguments import check_batch
from dpviz.figures.trace_words import device_name, rows_text

if TYPE_CHECKING:  # for the annotations only: the flow itself is drawn without pandas
    import pandas as pd


class Node(NamedTuple):
    node: int  # its index in the list
    step: str
    kind: str  # one of LANE_KINDS, TALL_KINDS or MODEL_KINDS
    lane: int | None  # the GPU whose row it sits in (None: the input batch, before any GPU has it)
    rows: int
    offset: int  # its first row in the batch
    hover: str


class Link(NamedTuple):
    step: str
    source: int  # nodes' indices
    target: int
    device: int  # whose colour it is drawn in
    rows: int  # 0: a whole model's parameters or gradients
    offset: int
    hover: str


NODE_COLUMNS, LINK_COLUMNS = list(Node._fields), list(Link._fields)
# Node kinds. A lane node sits in its GPU's row; TALL ones (the batch, the gathered output and its
# gradient) hold one slice per chunk; MODEL ones (parameters, their sum, the step) are model-sized.
LANE_KINDS = ("forward", "no_rows", "failed", "backward")
TALL_KINDS = ("batch", "output", "loss")
GATHERED_KINDS = ("output", "loss")  # on the output device alone: drawn in its lane, never over the others'
MODEL_KINDS = ("parameters", "sum", "step")
PREVIEW_IDS = 8  # dataset row ids listed in a hover before "…"


def _shape(shape: list[int] | None) -> str:
    if shape is None:
        return "no tensor"
    return " × ".join(f"{n:,}" for n in shape) if shape else "a 0-dim tensor"


def _preview(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:PREVIEW_IDS])
    return shown + (", …" if len(ids) > PREVIEW_IDS else "")


def failed_replica(trace: Trace, batch: int) -> Span | None:
    """The forward of the replica DataParallel's error names, when `batch` is the batch that failed."""
    failure = trace.failure
    if failure is None or failure.batch != batch or failure.replica is None:
        return None
    return next((s for s in trace.replicas(batch) if s.replica == failure.replica), None)


def parameter_bytes(trace: Trace) -> int | None:
    """The model's parameter bytes on device_ids[0], when the memory samples break memory down by kind."""
    sizes = [m.bytes for m in trace.memory if m.category == "parameters" and trace.lanes and m.lane == trace.lanes[0].id]
    return max(sizes) if sizes else None


def flow_steps(trace: Trace, batch: int) -> list[str]:
    """The drawn phases `batch` went through, in DataParallel's order (apply is drawn as its forwards)."""
    present = {s.phase for s in trace.spans_of(batch)}
    return [p.name for p in trace.vocabulary.phases if p.drawn and p.name in present]


def prepare_flow_links(trace: Trace, batch: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """flow_links as two DataFrames (nodes, links), columns NODE_COLUMNS and LINK_COLUMNS."""
    import pandas as pd  # only here: the figure draws from the lists

    nodes, links = flow_links(trace, batch)
    return pd.DataFrame.from_records(nodes, columns=NODE_COLUMNS), pd.DataFrame.from_records(links, columns=LINK_COLUMNS)


def flow_links(trace: Trace, batch: int) -> tuple[list[Node], list[Link]]:
    """(nodes, links) of `batch`, in the order DataParallel took its steps."""
    check_batch(trace, batch)
    words, facts = trace.vocabulary, trace.batches[batch]
    steps = flow_steps(trace, batch)
    nodes: list[Node] = []
    links: list[Link] = []
    size = parameter_bytes(trace)
    size_text = f" ({human_bytes(size)})" if size else ""
    zero = device_name(trace.lanes[0].id if trace.lanes else 0)

    def node(step: str, kind: str, lane: int | None, rows: int, hover: str, offset: int = 0) -> int:
        nodes.append(Node(len(nodes), step, kind, lane, rows, offset, hover))
        return len(nodes) - 1

    def link(step: str, source: int, target: int, device: int, rows: int, hover: str, offset: int = 0) -> None:
        links.append(Link(step, source, target, device, rows, offset, hover))

    forwards = [s for s in trace.replicas(batch) if s.lane is not None]
    failed = failed_replica(trace, batch)
    ids = facts.sample_ids
    out = trace.output_device
    source = None  # the node the next step's rows come from
    if "scatter" in steps:
        source = node("scatter", "batch", None, facts.rows,
                      f"input batch {_shape(facts.input_shape)}: {words.phase('scatter').label} cuts it into one chunk per device")
    model = None
    if "replicate" in steps:
        model = node("replicate", "parameters", trace.lanes[0].id if trace.lanes else 0, 0,
                     f"{zero}'s parameters{size_text}: {words.phase('replicate').label} copies them to every replica, on every batch")
    chunk_nodes: dict[int, int] = {}
    for span in forwards:
        name = device_name(span.lane)
        if span is failed:
            kind, what = "failed", f"{name}'s replica raised {plotly_text(trace.failure.type, 40)} on {rows_text(span.row_offset, span.rows)}"
        elif called_without_rows(span):
            kind, what = "no_rows", f"{name}'s replica was called with no tensor of the batch (the keywords alone)"
        else:
            kind, what = "forward", f"{name}'s replica: forward on {rows_text(span.row_offset, span.rows)}, " \
                                    f"{_shape(span.input_shape)} → {_shape(span.output_shape)}"
        chunk_nodes[span.lane] = node("forward", kind, span.lane, span.rows, what, span.row_offset)
        if source is not None and span.rows > 0:
            link("scatter", source, chunk_nodes[span.lane], span.lane, span.rows,
                 f"{words.phase('scatter').label}: {rows_text(span.row_offset, span.rows)} of the batch to {name}"
                 f"<br>dataset rows {_preview(ids[span.row_offset: span.row_offset + span.rows])}", span.row_offset)
        if model is not None:
            link("replicate", model, chunk_nodes[span.lane], span.lane, 0,
                 f"{words.phase('replicate').label}: a copy of {zero}'s parameters{size_text} for {name}'s replica, made anew for this batch")
    gathered = [s for s in forwards if s.output_shape is not None and s.rows > 0 and s is not failed]
    source = None
    if "gather" in steps:
        source = node("gather", "output", out, sum(s.rows for s in gathered),
                      f"output {_shape(facts.output_shape)}, {words.word('gathered', lane=device_name(out))} in GPU order")
        for span in gathered:
            link("gather", chunk_nodes[span.lane], source, span.lane, span.rows,
                 f"{words.phase('gather').label}: {device_name(span.lane)}'s output {_shape(span.output_shape)} copied to {device_name(out)}",
                 span.row_offset)
    elif len(gathered) == 1:
        source = chunk_nodes[gathered[0].lane]  # one device: its output is the output
    if "loss" not in steps or source is None:
        return nodes, links
    (loss,) = batch_spans(trace, batch, "loss")[:1] or [None]
    loss_lane = loss.lane if loss is not None and loss.lane is not None else out
    rows = sum(s.rows for s in gathered)
    grad = node("loss", "loss", loss_lane, rows,
                f"{words.phase('loss').label} on {device_name(loss_lane)}, and its gradient with respect to the output, {_shape(facts.output_shape)}")
    link("loss", source, grad, loss_lane, rows, f"the output, {_shape(facts.output_shape)}, into the {words.phase('loss').label}")
    backs: dict[int, int] = {}
    for span in batch_spans(trace, batch, "backward"):
        if span.lane is None:
            continue
        name = device_name(span.lane)
        backs[span.lane] = node("backward", "backward", span.lane, span.rows,
                                f"{name}'s replica: {words.phase('backward').label} on the gradient of "
                                f"{rows_text(span.row_offset, span.rows)}, a gradient for every parameter", span.row_offset)
        link("backward", grad, backs[span.lane], span.lane, span.rows,
             f"gather's backward: the output gradient's {rows_text(span.row_offset, span.rows)}, "
             f"{_shape(span.input_shape)}, sent back to {name}", span.row_offset)
    reduces = batch_spans(trace, batch, "reduce")
    total = None
    if reduces and reduces[0].lane is not None:
        lane = reduces[0].lane
        total = node("reduce", "sum", lane, 0,
                     f"{words.phase('reduce').label} on {device_name(lane)}: {plural(len(backs), 'replica')}' gradients added, a sum, not a mean")
        for device, back in backs.items():
            link("reduce", back, total, device, 0,
                 f"{device_name(device)}'s replica: a gradient for every parameter{size_text}, added on {device_name(lane)}")
    stepped = batch_spans(trace, batch, "step")
    if stepped and stepped[0].lane is not None:
        lane = stepped[0].lane
        step = node("step", "step", lane, 0, f"{words.phase('step').label} on {device_name(lane)}: updates the model's own parameters")
        for back in ([total] if total is not None else list(backs.values())[:1]):
            link("step", back, step, lane, 0, f"the gradients, in the model's own .grad on {device_name(lane)}, used by the step")
    return nodes, links

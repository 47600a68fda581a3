"""Flow: every step DataParallel takes for one batch, one row per GPU, one column per step.

    flow_figure(trace, batch=3)

The batch is scattered into one chunk per device, GPU 0's parameters are replicated to every replica
(on every batch), each replica runs its forward and the outputs are gathered onto the output device.
Training comes back: the loss on the output device, its gradient split back to each replica with the
forward's chunk sizes, each replica's gradients summed onto device_ids[0] and the optimizer step there.
Band widths are rows of the batch; the parameters and each replica's gradients are one thin band.

A failed batch marks the replica DataParallel's error names, where it failed. A replica called with
no tensor of the batch (scatter_kwargs padding a keyword's copies) is drawn as called, with no rows;
a device that got nothing is idle. Data: flow_links.py; drawing: flow_draw.py.
"""
from __future__ import annotations

from dpviz.analysis.batch_facts import batches_planned
import textwrap
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from dpviz.echo import plotly_text
from dpviz.analysis.batch_facts import batch_spans, called_without_rows
from dpviz.trace import Trace
from dpviz.analysis.wording import device_list, numbered, plural
from dpviz.engines.dp.read.flow_draw import plot_flow_lanes
from dpviz.engines.dp.read.scatter_pieces import idle_reasons
from dpviz.engines.dp.read.flow_links import _preview, failed_replica, flow_links, flow_steps
from dpviz.figures.arguments import check_batch
from dpviz.figures.trace_words import NAME_LIMIT, backend_note, device_name, rows_span, rows_text

if TYPE_CHECKING:  # for the annotations only: the flow itself is drawn without pandas
    import pandas as pd

BATCH_COLOR = "#4D4D4D"  # the DDP flow's dataset node
BACK_COLUMNS = ["device", "used", "rows", "first_row", "gradient_shape", "label"]
NOTE_CHARS = 64  # a subtitle line: fits a chart 500 px wide at the subtitle's size


def prepare_flow(trace: Trace, batch: int) -> pd.DataFrame:
    """One row per device for `batch` (a DataFrame): its slice of the batch, label and dataset rows (idle:
    used=False; a replica called with no tensor of the batch: used with 0 rows)."""
    from dpviz.analysis.tables import batch_split  # pandas: for tables and tests, not needed to draw the flow

    check_batch(trace, batch)
    table = batch_split(trace, batch)
    ids = trace.batches[batch].sample_ids
    table["name"] = [device_name(d) for d in table["device"]]
    table["label"] = [
        f"{name}: {rows_text(first, rows)}" if used and rows else f"{name}: called with no rows" if used else f"{name}: idle"
        for name, first, rows, used in zip(table["name"], table["first_row"], table["rows"], table["used"])
    ]
    table["dataset_rows"] = [
        _preview(ids[first : first + rows]) if used else ""
        for first, rows, used in zip(table["first_row"], table["rows"], table["used"])
    ]
    return table


def prepare_backward_flow(trace: Trace, batch: int) -> pd.DataFrame:
    """One row per device for `batch` of a training run (a DataFrame): the slice of the output gradient
    the gather's backward sent it (rows, first row, shape), or used=False. Empty for a forward-only trace."""
    import pandas as pd  # for tables and tests, not needed to draw the flow

    check_batch(trace, batch)
    backwards = {s.lane: s for s in batch_spans(trace, batch, "backward")}
    records = []
    for lane in trace.lanes:
        span = backwards.get(lane.id)
        if span is None:
            records.append((lane.id, False, 0, -1, None, f"{device_name(lane.id)}: idle"))
        else:
            label = f"{device_name(lane.id)}: gradient of {rows_text(span.row_offset, span.rows)}"
            records.append((lane.id, True, span.rows, span.row_offset, span.input_shape, label))
    table = pd.DataFrame.from_records(records, columns=BACK_COLUMNS)
    return table if table["used"].any() else table.iloc[0:0]


# From this many GPUs each lane's label is one line ('GPU 7: rows 28-29', the count left to the band's width): two
# lines a lane put GPUs 6 and 7 of 8 under a projector's first screen, and GPUs 8-15 of 16, in Presenting's type.
ONE_LINE_LANES = 7


def lane_labels(trace: Trace, batch: int) -> list[str]:
    """Each lane's label: its GPU, and the rows it got ('row 0', 'idle', 'called, no rows'), on two lines, or on one
    past ONE_LINE_LANES GPUs."""
    forwards = {s.lane: s for s in trace.replicas(batch) if s.lane is not None}
    one_line = len(trace.lanes) >= ONE_LINE_LANES
    labels = []
    for lane in trace.lanes:
        span = forwards.get(lane.id)
        rows = ("idle" if span is None else "called, no rows" if called_without_rows(span)
                else (rows_span if one_line else rows_text)(span.row_offset, span.rows))
        labels.append(f"{device_name(lane.id)}{': ' if one_line else '<br>'}{rows}")
    return labels


def _wrapped(text: str) -> str:
    return "<br>".join(textwrap.wrap(text, NOTE_CHARS)) if text else ""


def flow_figure(trace: Trace, batch: int = 0) -> go.Figure:
    """Every step of `batch`: scatter, replicate, forwards, gather and, training, loss, the output
    gradient split back, the gradients' sum and the step, one row per GPU."""
    nodes, links = flow_links(trace, batch)
    steps = flow_steps(trace, batch)
    facts, words = trace.batches[batch], trace.vocabulary
    forwards = [s for s in trace.replicas(batch) if s.lane is not None]
    with_rows = [s for s in forwards if not called_without_rows(s)]
    without = [s.lane for s in forwards if called_without_rows(s)]
    idle = idle_reasons(trace, batch)
    gpus, out = plural(len(trace.lanes), words.lane_noun), device_name(trace.output_device)
    failure, failed = trace.failure, failed_replica(trace, batch)
    total = batches_planned(trace)
    head = f"{numbered(batch, total, 'Batch')}: {plural(facts.rows, 'row')}"
    if len(trace.lanes) == 1 or "replicate" not in steps and len(with_rows) == 1 and failure is None:
        lines = [f"{head} on {out}", words.word("not_gathered")]
    else:
        lines = [f"{head} scattered over {len(with_rows)} of {gpus}"]
    notes = [backend_note(trace)]
    failed_text = None
    if failure is not None and failure.batch == batch:
        error = plotly_text(failure.type, NAME_LIMIT)  # the failure's words may come from a trace file
        where = f" in replica {failure.replica}" + (f" on {device_name(failed.lane)}" if failed is not None else "")
        lines.append(f"then {error}{where if failure.replica is not None else ''}: no output")
        failed_text = error
        reached = sum(s.rows for s in with_rows)
        if reached < facts.rows:  # zip truncation: fewer pieces of another argument than chunks of the batch
            notes.append(f"{plural(facts.rows - reached, 'row')} reached no replica")
        notes.append(plotly_text(failure.original, 120))
    elif "gather" in steps:
        back = "; gradients summed on " + device_name(batch_spans(trace, batch, "reduce")[0].lane) \
            if batch_spans(trace, batch, "reduce") and batch_spans(trace, batch, "reduce")[0].lane is not None else ""
        lines.append(words.word("gathered", lane=out) + back)
    elif "step" in steps:
        lines[-1] += "; backward and step there"
    for why in dict.fromkeys(idle.values()):  # the GPUs idle for one reason in one note
        lanes = [lane for lane, said in idle.items() if said == why]
        notes.append(f"{device_list(lanes)} idle: {why if len(lanes) == 1 else why.replace(' for it', ' for them', 1)}")
    if without:
        notes.append(f"{device_list(without)} called with no tensor of the batch: scatter_kwargs padded "
                     f"{'its' if len(without) == 1 else 'their'} positional arguments with ()")
    if "backward" in steps and "reduce" in steps:
        notes.append("widths: rows of the batch, then of the output gradient sent back")
    note = "<br>".join(_wrapped(n) for n in notes if n)
    return plot_flow_lanes(trace, nodes, links, steps=steps, lane_labels=lane_labels(trace, batch), idle=idle,
                           failed_text=failed_text, title="<br>".join(lines), notes=[note])

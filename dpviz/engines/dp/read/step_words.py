"""What happens in each of DataParallel's steps of one batch, in plain words, naming the devices.

    step_story(trace, batch, "scatter")  # ([0, 1, 2], "the batch's 30 rows are cut into 3 chunks, ...")

Every number and device comes from the trace: the forwards' rows, the spans' lanes, the failure.
"""
from __future__ import annotations

from dpviz.echo import plotly_text
from dpviz.analysis.batch_facts import batch_spans, called_without_rows
from dpviz.trace import Trace
from dpviz.analysis.wording import device_list, plural
from dpviz.engines.dp.read.flow_links import failed_replica
from dpviz.figures.trace_words import NAME_LIMIT, device_name


def _shape(shape: list[int] | None) -> str:
    return " × ".join(f"{n:,}" for n in shape) if shape else "0-dim"


def step_story(trace: Trace, batch: int, step: str) -> tuple[list[int], str]:
    """The devices `step` of `batch` ran on (or sent to), and what it did there, in a sentence."""
    facts = trace.batches[batch]
    forwards = [s for s in trace.replicas(batch) if s.lane is not None]
    fed = [s.lane for s in forwards if not called_without_rows(s)]
    empty = [s.lane for s in forwards if called_without_rows(s)]
    every = [s.lane for s in forwards]
    zero = device_name(trace.lanes[0].id if trace.lanes else 0)
    out = device_name(trace.output_device)
    idle = [lane.id for lane in trace.lanes if lane.id not in every]
    if step == "scatter":
        text = (f"the batch's {plural(facts.rows, 'row')} are cut into {plural(len(fed), 'chunk')} "
                f"in order, one copied to each of {device_list(fed)}" if fed else "the batch is cut, and no chunk reaches a replica")
        if idle:
            text += f"; {device_list(idle)} get{'s' if len(idle) == 1 else ''} none"
        if empty:
            text += f"; {device_list(empty)} get{'s' if len(empty) == 1 else ''} only the keywords"
        return fed, text
    if step == "replicate":
        return every, (f"{zero}'s parameters are copied to {device_list(every)}: one replica per chunk, "
                       "made anew for this batch")
    if step == "forward":
        failed = failed_replica(trace, batch)
        text = (f"{device_list(every)} run their replicas at the same time, each on its own rows"
                if len(every) > 1 else f"{device_list(every)} runs the model on the whole batch")
        if failed is not None:
            error = plotly_text(trace.failure.type, NAME_LIMIT)
            text += f"; {device_name(failed.lane)}'s replica raises {error}, so the batch has no output"
        return every, text
    if step == "gather":
        gathered = [s.lane for s in forwards if s.output_shape is not None and s.rows > 0]
        return gathered, (f"the outputs of {device_list(gathered)} are copied to {out} and joined in GPU order: "
                          f"{_shape(facts.output_shape)}")
    lanes = [s.lane for s in batch_spans(trace, batch, step) if s.lane is not None]
    where = device_list(lanes) if lanes else out
    if step == "loss":
        return lanes, f"the loss is computed on {where}, then its gradient with respect to the whole output"
    if step == "backward":
        return lanes, (f"the output gradient is split back to {where} with the forward's chunk sizes; each replica's "
                       "backward makes a gradient for every parameter")
    if step == "reduce":
        backs = [s.lane for s in batch_spans(trace, batch, "backward") if s.lane is not None]
        return lanes, (f"the {plural(len(backs), 'replica')}' gradients are added on {where}, into the model's own "
                       ".grad: a sum, not a mean")
    if step == "step":
        return lanes, f"SGD updates the model's parameters on {where}; the next batch replicates them again"
    return lanes, trace.vocabulary.phase(step).hover

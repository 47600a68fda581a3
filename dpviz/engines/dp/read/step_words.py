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
from dpviz.engines.dp.read.scatter_pieces import batch_chunks, short_arguments
from dpviz.figures.trace_words import NAME_LIMIT, device_name


def _shape(shape: list[int] | None) -> str:
    return " × ".join(f"{n:,}" for n in shape) if shape else "0-dim"


def _scatter(trace: Trace, batch: int, forwards: list, fed: list[int]) -> str:
    """The scatter as torch makes it: torch.chunk cuts the batch, which sits on the first GPU (the tutorial moves it
    there), into chunks in order; chunk i goes to device i, and the copy is skipped where the chunk is already there.
    Every argument is cut alike and scatter zips their pieces, so an argument with fewer pieces (h0 cut on its
    layers) keeps fewer replicas, and the batch's later chunks reach none."""
    rows, chunks = trace.batches[batch].rows, batch_chunks(trace, batch)
    home = trace.lanes[0].id if trace.lanes else 0
    text = (f"the batch's {plural(rows, 'row')} are cut into {plural(len(chunks), 'chunk')} in order on "
            f"{device_name(home)}, where they are")
    short = short_arguments(trace, batch)
    if short:
        path = min(short, key=short.get)
        text += (f", but {plotly_text(path, NAME_LIMIT)} gives only {plural(short[path], 'piece')} on dim {trace.dim} "
                 f"and scatter zips every argument's pieces, so {plural(len(forwards), 'replica')} "
                 f"run{'s' if len(forwards) == 1 else ''}")
    if not fed:
        return text + "; no chunk reaches a replica"
    stays = fed[0] == home
    copied = fed[1:] if stays else fed
    parts = ["chunk 0 stays there"] if stays else []
    if copied:
        first, last = len(fed) - len(copied), len(fed) - 1
        which = (f"chunk {first} is" if first == last else f"chunks {first} and {last} are" if last == first + 1
                 else f"chunks {first}-{last} are")
        parts.append(f"{which} copied{'' if len(copied) == 1 else ' one'} to {'each of ' if len(copied) > 1 else ''}"
                     f"{device_list(copied)}")
    text += ": " + ", ".join(parts)
    reached = sum(s.rows for s in forwards if s.lane in fed)
    if reached < rows:
        text += f"; rows {reached}-{rows - 1} reach no replica"
    return text


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
        text = _scatter(trace, batch, forwards, fed)
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

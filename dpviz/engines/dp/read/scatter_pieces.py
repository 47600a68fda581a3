"""What scatter made of one batch's arguments, read from the trace: the chunks torch.chunk cut the batch into, the
split arguments that gave fewer pieces than that (scatter zips every argument's pieces, so the fewest decide how
many replicas run), and why a GPU ran no replica.

    short_arguments(trace, 0)   # {"h0": 1}: h0 cut on its layers gave one piece, so one replica for two GPUs
    idle_reasons(trace, 0)      # {1: "no piece of h0 for it (h0 was cut into 1 piece)"}
"""
from __future__ import annotations

from collections import defaultdict

from dpviz.analysis.wording import plural
from dpviz.echo import plotly_text
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.figures.trace_words import NAME_LIMIT
from dpviz.trace import Trace


def batch_chunks(trace: Trace, batch: int) -> list[int]:
    """The rows of each chunk torch.chunk cut `batch` into over the run's GPUs, in device order."""
    return chunk_sizes(trace.batches[batch].rows, len(trace.lanes))


def short_arguments(trace: Trace, batch: int) -> dict[str, int]:
    """The split tensors of `batch` that gave fewer pieces than the batch's chunks and are not cut in step with them
    (their pieces are not the batch's first chunks): path -> the pieces the replicas got. These cut the zip short."""
    chunks = batch_chunks(trace, batch)
    pieces: dict[str, list] = defaultdict(list)
    for a in trace.arguments:
        if a.batch == batch and a.mode == "split" and a.kind == "tensor" and len(a.shape) > trace.dim:
            pieces[a.path].append(a)
    short = {}
    for path, got in pieces.items():
        sizes = [a.shape[trace.dim] for a in sorted(got, key=lambda a: a.replica)]
        if len(sizes) < len(chunks) and sizes != chunks[:len(sizes)]:
            short[path] = len(sizes)
    return short


def idle_reasons(trace: Trace, batch: int) -> dict[int, str]:
    """Each GPU that ran no replica in `batch`, and why, in a few words as plotly text ('no rows left for it', 'no
    piece of h0 for it ...'): past the chunks torch.chunk made there were no rows; before them, another argument
    gave too few pieces."""
    ran = {s.lane for s in trace.replicas(batch) if s.lane is not None}
    chunks, short = batch_chunks(trace, batch), short_arguments(trace, batch)
    failure = trace.failure
    reasons = {}
    for position, lane in enumerate(lane.id for lane in trace.lanes):
        if lane in ran:
            continue
        if position >= len(chunks):
            reasons[lane] = "no rows left for it"
        elif short:
            fewest = min(short, key=short.get)
            name = plotly_text(fewest, NAME_LIMIT)  # a path from a trace file
            reasons[lane] = f"no piece of {name} for it ({name} was cut into {plural(short[fewest], 'piece')})"
        elif failure is not None and failure.batch == batch and not ran:
            reasons[lane] = "the batch failed before any replica ran"
        else:
            reasons[lane] = "no replica ran there"
    return reasons

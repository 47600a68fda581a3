"""What each batch of a run did, read from its trace's spans in plain Python.

    batch_spans(trace, 3, "forward")   # one phase's spans of one batch, in replica order
    chunks_per_batch(trace)            # rows per replica for every batch: the split DataParallel made
    memory_batches(trace)              # the batches whose memory the trace sampled

No pandas here: the page's first chart (a run's Flow) and its tabs need only these, and pandas takes
longer to import than the chart takes to draw. The DataFrames the other views are drawn from are
built in dpviz.tables.
"""
from __future__ import annotations

from .trace import Span, Trace


def called_without_rows(span: Span) -> bool:
    """A replica scatter_kwargs padded with an empty tuple: called with the keywords alone, no tensor of the batch."""
    return span.rows == 0 or span.input_shape is None


def batch_spans(trace: Trace, batch: int, phase: str) -> list[Span]:
    """The spans of one phase of one batch, in replica order (lane order for spans without a replica)."""
    spans = trace.spans_of(batch, phase)
    return sorted(spans, key=lambda s: (-1 if s.replica is None else s.replica, -1 if s.lane is None else s.lane))


def _without_chunk(trace: Trace, span: Span) -> bool:
    """A replica handed no tensor at all (a failing batch's padding): called, but with no chunk of the batch."""
    return span.input_shape is None and trace.failure is not None


def chunks_per_batch(trace: Trace) -> list[tuple[int, ...]]:
    """Rows per replica for every batch, in replica order: the split DataParallel made."""
    chunks: list[list[tuple[int, int]]] = [[] for _ in trace.batches]
    for span in trace.spans:
        if span.phase == "forward" and not _without_chunk(trace, span):
            chunks[span.batch].append((span.replica if span.replica is not None else 0, span.rows))
    return [tuple(rows for _, rows in sorted(c)) for c in chunks]


def calls_without_chunk(trace: Trace) -> list[int]:
    """Per batch, the replicas called with no chunk of it (the keyword pitfall's), which chunks_per_batch leaves out."""
    counts = [0] * len(trace.batches)
    for span in trace.spans:
        if span.phase == "forward" and span.lane is not None and _without_chunk(trace, span):
            counts[span.batch] += 1
    return counts


def memory_batches(trace: Trace) -> list[int]:
    """The batches memory was sampled for (the first and the last), in order."""
    return sorted({m.batch for m in trace.memory})

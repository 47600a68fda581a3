"""What each batch of a run did, read from its trace's spans in plain Python.

    batch_spans(trace, 3, "forward")   # one phase's spans of one batch, in replica order
    chunks_per_batch(trace)            # rows per replica for every batch: the split DataParallel made
    calls_without_chunk(trace)         # per batch, the replicas called with no chunk of it (the keyword pitfall)
    called_without_rows(span)          # whether one replica was called with no tensor of the batch
    memory_batches(trace)              # the batches whose memory the trace sampled
    waiting_lanes(trace, 3)            # lanes out of batches that hold their state through batch 3, waiting
    phase_times(trace)                 # spans and seconds per phase, in pipeline order
    memory_peaks(trace)                # how much device_ids[0] held at most, and any other device

No pandas here: a DataParallel run's first chart (its Flow), its tabs, key figures and explanations
need only these, and pandas takes longer to import than the chart takes to draw. The DataFrames the
other views are drawn from are built in dpviz.analysis.tables.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from dpviz.trace import Span, Trace


def batches_planned(trace: Trace) -> int:
    """The batches (steps) the run set out to take: every title's "of N". A failed run stops short of its plan, and
    a reader that counted only what ran would say "step 1 of 2" beside another's "step 2 of 4"."""
    return max(trace.config.num_batches, len(trace.batches))


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


def waiting_lanes(trace: Trace, batch: int) -> dict[int, int]:
    """Lanes that hold memory in `batch` but neither load nor run a forward in it: out of batches (data split by
    hand), each waits at the end for the others, holding its model's state. Each with the last batch it ran."""
    holding = {m.lane for m in trace.memory if m.batch == batch and m.bytes}
    ran: dict[int, set[int]] = {}
    for span in trace.spans:
        if span.phase in ("load", "forward") and span.lane is not None:
            ran.setdefault(span.lane, set()).add(span.batch)
    return {lane: max((b for b in ran.get(lane, ()) if b < batch), default=-1) for lane in sorted(holding)
            if batch not in ran.get(lane, ())}


@dataclass(frozen=True)
class PhaseTime:
    """One phase over a run: how many spans, and their seconds added up (overlapping forwards too)."""

    spans: int
    total_s: float

    @property
    def mean_s(self) -> float:
        return self.total_s / self.spans


def phase_times(trace: Trace) -> dict[str, PhaseTime]:
    """Spans and seconds per phase, in the vocabulary's pipeline order (a host phase before the lane
    phase it launches). Forward adds up all replicas, which overlap."""
    totals: dict[str, float] = {}
    counts: Counter[str] = Counter()
    for span in trace.spans:
        totals[span.phase] = totals.get(span.phase, 0.0) + span.duration
        counts[span.phase] += 1
    order = trace.vocabulary.order
    return {p: PhaseTime(counts[p], totals[p]) for p in sorted(counts, key=lambda p: (order.get(p, len(order)), p))}


@dataclass(frozen=True)
class MemoryPeak:
    """The most one device held: how many bytes, after which phase of which batch."""

    device: int
    bytes: int
    batch: int
    phase: str


def memory_peaks(trace: Trace) -> tuple[MemoryPeak, MemoryPeak | None] | None:
    """device_ids[0]'s peak and the largest peak of any other device (None with one device),
    over the sampled batches; None when the trace has no memory samples.

    Plain Python over the samples rather than memory_totals' table: the key figures and the explanation
    both ask on every new run, and a few hundred samples add up faster than a pandas merge starts.
    """
    if not trace.memory or not trace.lanes:
        return None
    order = trace.vocabulary.order
    held: dict[tuple[int, int, str], int] = {}
    for m in trace.memory:
        slot = (m.batch, order.get(m.phase, len(order)), m.phase)
        held.setdefault(slot, 0)
        held[(*slot, m.lane)] = held.get((*slot, m.lane), 0) + m.bytes
    slots = sorted(key for key in held if len(key) == 3)  # (batch, step index, phase): pipeline order
    first = trace.lanes[0].id

    def peak(lanes: list[int]) -> MemoryPeak | None:
        # The first of equal maxima: the earliest batch and phase, then the lowest device (a device that
        # held nothing at a sampled moment counts as 0 there, as in memory_totals).
        best = None
        for batch, _, phase in slots:
            for lane in lanes:
                total = held.get((batch, _, phase, lane), 0)
                if best is None or total > best.bytes:
                    best = MemoryPeak(lane, total, batch, phase)
        return best

    return peak([first]), peak(sorted(lane.id for lane in trace.lanes if lane.id != first))

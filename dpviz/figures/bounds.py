"""The one size bound every figure keeps, and the helpers views use to aggregate past it.

A mark is one thing the browser draws: a bar, a point, a heatmap cell, a Sankey node or link,
counted over every animation frame. Plotly 6+ sends numeric arrays base64-encoded, so a mark with
its hover data costs about 10-90 bytes of JSON (measured: 90 for a timeline bar with five hover
numbers, 14 for a heatmap cell). MAX_MARKS = 10,000 keeps every figure's JSON under ~0.9 MB, well
inside the 2 MB a browser draws without stalling.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import plotly.graph_objects as go

from dpviz.analysis.wording import counted

MAX_MARKS = 10_000
# Animation frames of the step-through view: beyond this a slider step is narrower than a pixel.
MAX_FRAMES = 50
# Batches the timeline's measured panel draws one by one; past it, one typical batch: 8 batches of 16
# staircased forwards are about the most an ~380 px plot (an 800 px window's chart) shows one by one.
DETAIL_BATCHES = 8


def _trace_marks(trace: go.BaseTraceType) -> int:
    if trace.type == "sankey":
        return len(trace.node.label or ()) + len(trace.link.value or ())
    if trace.type == "heatmap":
        z = trace.z if trace.z is not None else ()
        return sum(len(row) for row in z)
    for axis in ("x", "y"):
        values = getattr(trace, axis, None)
        if values is not None:
            return len(values)
    return 0


def count_marks(fig: go.Figure) -> int:
    """Marks drawn by `fig` over its data and all of its animation frames."""
    total = sum(_trace_marks(t) for t in fig.data)
    for frame in fig.frames or ():
        total += sum(_trace_marks(t) for t in frame.data or ())
    return total


def split_runs(chunks: Sequence[tuple[int, ...]]) -> list[tuple[int, int]]:
    """(first, last) batch of every run of consecutive batches with the same split."""
    runs: list[tuple[int, int]] = []
    for i, split in enumerate(chunks):
        if runs and chunks[runs[-1][0]] == split:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def batch_label(first: int, last: int) -> str:
    """"batch 4" for index 3, "batches 1-3" for indices 0..2: counted from 1, as a reader counts them."""
    return f"batch {counted(first)}" if first == last else f"batches {counted(first)}-{counted(last)}"


def representative_batches(chunks: Sequence[tuple[int, ...]], limit: int) -> list[int]:
    """At most `limit` batch indices: the first and last batch, the first batch of every new split,
    then evenly spaced batches, in order."""
    count = len(chunks)
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if count <= limit:
        return list(range(count))
    picked: list[int] = [0, count - 1]
    picked += [first for first, _ in split_runs(chunks)]
    picked = _unique(picked)[:limit]
    spare = limit - len(picked)
    if spare > 0:
        step = count / (spare + 1)
        picked = _unique(picked + [round(step * (k + 1)) for k in range(spare)])
    return sorted(picked)[:limit]


def _unique(values: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(values))

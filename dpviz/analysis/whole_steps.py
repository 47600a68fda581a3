"""Whole steps, by one rule for every engine: the steps in which every device ran all the rows it ever runs in a
step (not a short last batch, not a rank that ran out of rows).

    rows_per_step(trace)     # per step, the rows each device ran forward
    whole_steps(trace)       # the whole steps, in order
    last_whole_step(trace)   # the last of them: where One step opens and what a comparison reads

Apart from dpviz.analysis.opening_step, which reads the presets too: what reads only the run (a comparison's
counted step, a preset's claim on it) needs no preset. No torch.
"""
from __future__ import annotations

from collections import defaultdict

from dpviz.trace import Trace

FORWARD = "forward"  # the phase whose spans carry each device's rows in every engine


def rows_per_step(trace: Trace) -> list[dict[int, int]]:
    """Per step, the rows each device ran forward (a pipeline's stage: its microbatches summed)."""
    rows: list[dict[int, int]] = [defaultdict(int) for _ in trace.batches]
    for span in trace.spans:
        if span.phase == FORWARD and span.lane is not None and 0 <= span.batch < len(rows):
            rows[span.batch][span.lane] += span.rows
    return rows


def whole_steps(trace: Trace) -> list[int]:
    """The steps in which every device ran as many rows as it runs in any step of the run (a device that never
    runs any, DataParallel's GPU beyond torch.chunk's chunks, counts as whole); a failed step is not whole."""
    return _whole_steps(trace, rows_per_step(trace))


def _whole_steps(trace: Trace, rows: list[dict[int, int]]) -> list[int]:
    lanes = [lane.id for lane in trace.lanes]
    most = {lane: max((step.get(lane, 0) for step in rows), default=0) for lane in lanes}
    failed = trace.failure.batch if trace.failure is not None else None
    return [i for i, step in enumerate(rows)
            if i != failed and any(step.values()) and all(step.get(lane, 0) == most[lane] for lane in lanes)]


def last_whole_step(trace: Trace) -> int:
    """The last whole step; without one, the last of the steps that ran the most rows (0 for a run of none)."""
    return _last_whole_step(trace)[0]


def _last_whole_step(trace: Trace) -> tuple[int, bool]:
    """last_whole_step, and whether it is whole: one pass over a run's spans (a million rows make 80,000)."""
    rows = rows_per_step(trace)
    whole = _whole_steps(trace, rows)
    if whole:
        return whole[-1], True
    totals = [sum(step.values()) for step in rows]
    return (max(range(len(totals)), key=lambda i: (totals[i], i)) if totals else 0), False

"""The step a run's views of one step open on, by one rule for every engine, and the words that say which.

    opening_step(trace)          # 0-based: a preset's lesson step, else the failed step, else the last whole step
    opening_reason(trace, step)  # 'the last whole step', 'the step it failed in', ... ('' for another step)

A class flips from DataParallel to DDP to a pipeline on one link: each One step must show the same step, and say
why that one. A whole step is one in which every device ran all the rows it ever runs in a step: not a short last
batch, not a rank that ran out of rows. The last whole one, so that what a step makes once (DDP's buckets, Adam's
state) is already there, as the Memory page reads it (dpviz.analysis.memory_compare). No torch.
"""
from __future__ import annotations

from collections import defaultdict

from dpviz.presets import LAST_STEP, preset_of
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
    rows = rows_per_step(trace)
    lanes = [lane.id for lane in trace.lanes]
    most = {lane: max((step.get(lane, 0) for step in rows), default=0) for lane in lanes}
    failed = trace.failure.batch if trace.failure is not None else None
    return [i for i, step in enumerate(rows)
            if i != failed and any(step.values()) and all(step.get(lane, 0) == most[lane] for lane in lanes)]


def last_whole_step(trace: Trace) -> int:
    """The last whole step; without one, the last of the steps that ran the most rows (0 for a run of none)."""
    whole = whole_steps(trace)
    if whole:
        return whole[-1]
    totals = [sum(step.values()) for step in rows_per_step(trace)]
    return max(range(len(totals)), key=lambda i: (totals[i], i)) if totals else 0


def _failed(trace: Trace) -> int | None:
    failure = trace.failure
    return failure.batch if failure is not None and 0 <= failure.batch < len(trace.batches) else None


def opening_step(trace: Trace) -> int:
    """The step every view of one step opens on, whatever the engine: a preset's lesson step (its short last
    batch, or the step it fails in), else the step a run failed in, else the last whole step."""
    if not trace.batches:
        return 0
    preset = preset_of(trace.config)
    if preset is not None and preset.step == LAST_STEP:
        return len(trace.batches) - 1
    failed = _failed(trace)
    return failed if failed is not None else last_whole_step(trace)


def opening_reason(trace: Trace, step: int) -> str:
    """Why the views open on `step`, in a few words ('the last whole step'); '' when they open on another."""
    if not trace.batches or step != opening_step(trace):
        return ""
    unit = trace.spec.unit
    preset = preset_of(trace.config)
    if preset is not None and preset.step == LAST_STEP:
        return f"the last {unit}, the lesson's"
    if step == _failed(trace):
        return f"the {unit} it failed in"
    if step in whole_steps(trace):
        return f"the last whole {unit}"
    return f"the {unit} with the most rows"


def whole_words(trace: Trace) -> str:
    """What a whole step is, for a note: 'whole: every rank ran all its rows'."""
    return f"whole: every {trace.vocabulary.lane_noun} ran all its rows"

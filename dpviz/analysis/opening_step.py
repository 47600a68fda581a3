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


def _failed(trace: Trace) -> int | None:
    failure = trace.failure
    return failure.batch if failure is not None and 0 <= failure.batch < len(trace.batches) else None


def opening_step(trace: Trace) -> int:
    """The step every view of one step opens on, whatever the engine: a preset's lesson step (its short last
    batch, or the step it fails in), else the step a run failed in, else the last whole step."""
    return _opening(trace)[0]


def opening_reason(trace: Trace, step: int) -> str:
    """Why the views open on `step`, in a few words ('the last whole step'); '' when they open on another."""
    opening, reason = _opening(trace)
    return reason if trace.batches and step == opening else ""


def _opening(trace: Trace) -> tuple[int, str]:
    """opening_step and opening_reason's words for it, the run's rows looked at once."""
    if not trace.batches:
        return 0, ""
    unit = trace.spec.unit
    preset = preset_of(trace.config)
    if preset is not None and preset.step == LAST_STEP:
        return len(trace.batches) - 1, f"the last {unit}, the lesson's"
    failed = _failed(trace)
    if failed is not None:
        return failed, f"the {unit} it failed in"
    step, whole = _last_whole_step(trace)
    return step, f"the last whole {unit}" if whole else f"the {unit} with the most rows"


def whole_words(trace: Trace) -> str:
    """What a whole step is, for a note: 'whole: every rank ran all its rows'."""
    return f"whole: every {trace.vocabulary.lane_noun} ran all its rows"

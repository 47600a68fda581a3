"""The step a run's views of one step open on, by one rule for every engine, and the words that say which.

    opening_step(trace)          # 0-based: a preset's lesson step, else the failed step, else the last whole step
    opening_reason(trace, step)  # 'the last whole step', 'the step it failed in', ... ('' for another step)

A class flips from DataParallel to DDP to a pipeline on one link: each One step must show the same step, and say
why that one. A whole step is one in which every device ran all the rows it ever runs in a step: not a short last
batch, not a rank that ran out of rows. The last whole one, so that what a step makes once (DDP's buckets, Adam's
state) is already there, as the Memory page reads it (dpviz.analysis.memory_compare). No torch.
"""
from __future__ import annotations

from dpviz.analysis.whole_steps import _last_whole_step, last_whole_step, rows_per_step, whole_steps  # noqa: F401
from dpviz.presets import LAST_STEP, preset_of
from dpviz.trace import Trace


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

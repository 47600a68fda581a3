"""The one rule every engine's views of one step open by (dpviz.analysis.opening_step), on a real DDP run: the last
whole step, not a short last one; a failed step; a step made short on one rank is not whole."""
from __future__ import annotations

import dataclasses

from ddp_traces import ddp_trace
from dpviz.analysis.opening_step import opening_reason, opening_step, rows_per_step, whole_steps
from dpviz.trace.model import Failure


def test_the_last_whole_step_is_where_every_rank_ran_its_full_batch():
    trace = ddp_trace("four_train")  # steps of 8, 8, 7 rows a rank
    assert [sorted(step.values()) for step in rows_per_step(trace)] == [[8] * 4, [8] * 4, [7] * 4]
    assert whole_steps(trace) == [0, 1] and opening_step(trace) == 1
    assert opening_reason(trace, 1) == "the last whole step" and opening_reason(trace, 0) == ""
    # Step 2 made short on rank 1: no longer whole, so the views open on step 1.
    short = dataclasses.replace(trace, spans=[dataclasses.replace(s, rows=s.rows - 1) if s.phase == "forward"
                                              and s.batch == 1 and s.lane == 1 else s for s in trace.spans])
    assert whole_steps(short) == [0] and opening_step(short) == 0


def test_a_failed_run_opens_on_the_step_it_failed_in():
    trace = ddp_trace("four_train")
    failed = dataclasses.replace(trace, failure=Failure(batch=2, type="RuntimeError", message="raised"))
    assert opening_step(failed) == 2 and opening_reason(failed, 2) == "the step it failed in"

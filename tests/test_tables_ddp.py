"""The per-step tables of a DistributedDataParallel trace: collectives and the backward's computing.

Real runs (tests/ddp_traces.py); torch is the oracle for the buckets: its own bucket assignment, given
the tensors in the order the reducer reported, makes as many buckets as the run recorded.
"""
from __future__ import annotations

import pytest
import torch.distributed as dist

from ddp_traces import ddp_trace
from dpviz.engines.ddp.read.tables import backwards, bucket_layout, bucket_layouts, collectives, computing_overlap
from dpviz.engines.workload.models import build_model


@pytest.mark.parametrize("name", ["four_train", "two_train", "two_accumulate"])
def test_bucket_all_reduces_count_collectives_one_per_bucket_per_step(name):
    trace = ddp_trace(name)
    synced = sorted({s.batch for s in trace.spans if s.phase == "allreduce"})
    per_layout = sum(len(bucket_layout(trace, step)) for step in synced)
    spans = sum(s.phase == "allreduce" for s in trace.spans)
    assert collectives(trace) == per_layout
    assert spans == per_layout * len(trace.lanes)  # every rank joins every collective: the spans are × ranks


def test_the_recorded_bucket_counts_are_torchs_own_assignment():
    trace = ddp_trace("four_train")
    model, _ = build_model(trace.config.model, trace.config.input_size, trace.config.output_size)
    params = dict(model.named_parameters())
    cap = int(trace.config.bucket_cap_mb * 2**20)
    layouts = bucket_layouts(trace)
    assert len(layouts[0]["buckets"]) == 1  # before the first backward: one bucket, whatever the cap (ddp-facts §3.6)
    rebuilt = [name for bucket in layouts[1]["buckets"] for name in bucket["params"]]
    # torch's compute_bucket_assignment_by_size over the tensors in the order the reducer rebuilt them
    assignment, _ = dist._compute_bucket_assignment_by_size([params[n] for n in rebuilt], [cap])
    assert len(assignment) == len(layouts[1]["buckets"])
    assert collectives(trace) == 1 + len(assignment) * (len(trace.batches) - 1)


def test_computing_overlap_counts_all_reduce_only_up_to_the_last_bucket_launch():
    trace = ddp_trace("four_train")
    overlap, total = computing_overlap(trace)
    assert total == pytest.approx(sum(s.duration for s in trace.spans if s.phase == "allreduce"))
    assert 0 <= overlap <= total
    for b in backwards(trace):
        launches = [s.start for s in trace.spans_of(b.step, "allreduce") if s.lane == b.rank]
        assert b.start <= b.computed_until <= b.end
        assert b.computed_until == (max(launches) if launches else b.end)
    # One bucket in step 0: it launches once every gradient is made, so nothing of it ran beside the computing.
    assert computing_overlap(trace, range(0, 1))[0] == 0.0
    assert computing_overlap(trace, range(1, len(trace.batches)))[0] == pytest.approx(overlap)

"""The bytes each rank hands its collectives, recorded per step, against torch: DDP's bucket all-reduces (the
reducer's own bucket sizes), ZeRO-1's broadcasts (ZeroRedundancyOptimizer's partitions of the parameters) and
FSDP's all-gathers and reduce-scatters (every parameter padded on dim 0 to a multiple of the ranks, as FSDP2
shards it). Real gloo processes, 2 ranks, a tiny MLP; the facts go through a trace file and back."""
from __future__ import annotations

from collections import defaultdict
from functools import cache

import pytest
import torch

from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.trace import json_io as trace_json
from dpviz.trace.values import TraceError

RANKS = 2
# Linear(5, 16), BatchNorm1d(16), Linear(16, 3): the last weight's 3 rows do not split over 2 ranks (FSDP pads).
SETTINGS = dict(model="mlp", output_size=3, gpus=RANKS, train=True, batch_size=8, data_size=24, optimizer="adam")


@cache
def recorded(name: str, **more) -> object:
    trace = engine(name).record(RunConfig(engine=name, **SETTINGS, **more))
    assert trace.failure is None
    return trace_json.loads(trace_json.dumps(trace))  # what a reader of the file gets, checked


def per_step(trace) -> list[dict[int, dict[str, int]]]:
    """Per rank: step -> collective -> bytes."""
    out = []
    for rows in trace.facts["moved"]:
        steps: dict[int, dict[str, int]] = defaultdict(dict)
        for step, collective, _calls, size in rows:
            steps[step][collective] = size
        out.append(dict(steps))
    return out


def parameters() -> list[torch.nn.Parameter]:
    model, _ = tutorial.build(RunConfig(engine="ddp", **SETTINGS))
    return list(model.parameters())


def test_ddp_hands_each_all_reduce_a_bucket_and_every_step_all_of_them():
    trace = recorded("ddp", bucket_cap_mb=0.0002)  # several buckets
    layouts = trace.facts["ddp"]["buckets"]
    reducer = trace.facts["ddp"]["reducer"]
    assert len(reducer["rebuilt_bucket_sizes"]) > 1  # after the first step's rebuild
    model = sum(p.numel() * p.element_size() for p in parameters())
    for rank in per_step(trace):
        assert sorted(rank) == list(range(len(trace.batches)))
        for step, moved in rank.items():
            buckets = [b["bytes"] for b in [lay for lay in layouts if lay["step"] <= step][-1]["buckets"]]
            assert moved == {"all-reduce": sum(buckets)} == {"all-reduce": model}
            assert buckets in (reducer["bucket_sizes"], reducer["rebuilt_bucket_sizes"])  # torch's reducer's own
    last = len(trace.batches) - 1
    calls = {row[2] for rows in trace.facts["moved"] for row in rows if row[0] == last}
    assert calls == {len(reducer["rebuilt_bucket_sizes"])}  # one all-reduce per bucket


def test_zero1_broadcasts_every_shard_from_its_owner_each_step():
    from torch.distributed.optim import ZeroRedundancyOptimizer  # noqa: F401  the optimizer the run stepped

    trace = recorded("zero1")
    model = sum(p.numel() * p.element_size() for p in parameters())
    for rank in per_step(trace):
        for moved in rank.values():
            # DDP's all-reduce of every gradient, then each partition broadcast: every parameter once
            assert moved == {"all-reduce": model, "broadcast": model}
    calls = {row[2] for rows in trace.facts["moved"] for row in rows if row[1] == "broadcast"}
    assert calls == {len(parameters())}  # one broadcast per parameter (not bucketed views)


def padded(p: torch.Tensor, world: int) -> int:
    rows = p.shape[0]
    return -(-rows // world) * world * (p.numel() // rows) * p.element_size()


def test_fsdp_gathers_twice_and_reduce_scatters_the_padded_parameters():
    trace = recorded("fsdp")
    whole = sum(padded(p, RANKS) for p in parameters())
    assert whole > sum(p.numel() * p.element_size() for p in parameters())  # the 3-row weight is padded to 4
    for rank in per_step(trace):
        for moved in rank.values():
            assert moved == {"all-gather (forward)": whole, "all-gather (backward)": whole, "reduce-scatter": whole}


def test_a_trace_with_a_collective_no_engine_runs_does_not_load():
    document = trace_json.dumps(recorded("ddp", bucket_cap_mb=0.0002)).replace('"all-reduce"', '"all-to-all"', 1)
    with pytest.raises(TraceError, match="collective is one of"):
        trace_json.loads(document)


def test_bytes_of_a_step_the_run_never_took_do_not_load():
    import json

    data = json.loads(trace_json.dumps(recorded("fsdp")))
    data["facts"]["moved"][1].append([len(data["batches"]), "reduce-scatter", 1, 64])
    with pytest.raises(TraceError, match="facts moved has bytes of step"):
        trace_json.loads(json.dumps(data))

"""Small real DistributedDataParallel runs for the figure, summary, explain and page tests, recorded once.

Each is a real run (one gloo process per rank, forkserver started once per test session): 2 and 4
ranks, training and forward only, the MLP with bucket_cap_mb=0.0002 so that the reducer makes several
buckets after its rebuild, no_sync accumulation, and data sizes that leave DistributedSampler padding.
The first recording starts the forkserver (about 10 s); the others take about half a second each.
"""
from __future__ import annotations

from functools import cache

from dpviz import RunConfig
from dpviz.trace import json_io as trace_json
from dpviz.engines import engine
from dpviz.trace import Trace

BUCKETS = dict(model="mlp", bucket_cap_mb=0.0002)
CONFIGS = {
    # 90 rows over 4 ranks: 23 each (2 rows padded), per-rank batch ceil(32/4) = 8: steps of 8, 8, 7.
    "four_train": RunConfig(engine="ddp", gpus=4, train=True, batch_size=32, data_size=90, **BUCKETS),
    # 75 rows over 2 ranks: 38 each (1 row padded), per-rank batch 15: steps of 15, 15, 8.
    "two_train": RunConfig(engine="ddp", gpus=2, train=True, batch_size=30, data_size=75, **BUCKETS),
    # Forward only; batch_size 30 on 4 ranks gives 8 rows each, a global batch of 32, not 30.
    "four_forward": RunConfig(engine="ddp", gpus=4, train=False, batch_size=30, data_size=90, model="mlp"),
    # no_sync on steps 0 and 2, all-reduce on steps 1 and 3.
    "two_accumulate": RunConfig(engine="ddp", gpus=2, train=True, batch_size=30, data_size=100, accumulate=2, **BUCKETS),
    # In order, so the stride shows in the dataset's own row numbers: 20 rows, 3 ranks, 7 each (row 0 twice).
    "three_ordered": RunConfig(engine="ddp", gpus=3, train=True, batch_size=12, data_size=20, shuffle=False, **BUCKETS),
}


@cache
def ddp_trace(name: str) -> Trace:
    """The run `name` of CONFIGS, recorded once per session."""
    return engine("ddp").record(CONFIGS[name])


@cache
def ddp_document(name: str) -> str:
    """The run `name` as a trace file's text."""
    return trace_json.dumps(ddp_trace(name))


def every_ddp_trace() -> list[Trace]:
    return [ddp_trace(name) for name in CONFIGS]


@cache
def record_config(config) -> Trace:
    """Any DDP run (a preset's), recorded once per session."""
    return engine("ddp").record(config)

"""Traces for the figure, summary and explain tests.

`recorded(...)` records a small run once per test session. `synthetic(config)` builds, in about a
second, the trace the recorder would make for a run too long to record in a test (recording
10,000 batches on 16 simulated devices takes a minute and a half): the same lanes, batches, chunks
and phases (training's too), with made-up times and no memory samples. test_figures_bounds.py checks it against real recordings.
"""
from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np

from dpviz import RunConfig, record
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.trace import Batch, Lane, Span, Trace

# The largest run dpviz allows: 10,000 batches on 16 devices.
LARGEST = RunConfig(data_size=300_000, batch_size=30, gpus=16)
LARGEST_TRAINING = RunConfig(data_size=30_000, batch_size=30, gpus=16, train=True)  # MAX_TRAIN_BATCHES
MAX_JSON_BYTES = 2 * 1024 * 1024


@lru_cache(maxsize=None)
def recorded(**settings: object) -> Trace:
    return record(RunConfig(**settings))


def _training_spans(index: int, chunks: list[int], t: float) -> tuple[list[Span], float]:
    """Loss on the output device, a backward per replica (its forward chunk's rows), the sum, the step."""
    us = 1e-6
    spans = [Span("loss", index, t, t + 4 * us, lane=0)]
    t += 5 * us
    for replica, n in reversed(list(enumerate(chunks))):  # one CPU autograd thread, last replica first
        offset = sum(chunks[:replica])
        spans.append(Span("backward", index, t, t + 3 * us, lane=replica, replica=replica, row_offset=offset,
                          rows=n, input_shape=[n, 2], thread="MainThread"))
        t += 3 * us
    if len(chunks) > 1:
        spans.append(Span("reduce", index, t, t + 2 * us, lane=0))
    spans.append(Span("step", index, t + 3 * us, t + 6 * us, lane=0))
    return spans, t + 8 * us


def _batch_spans(index: int, rows: int, devices: int, t: float, train: bool = False) -> tuple[list[Span], float]:
    us = 1e-6
    if devices == 1:
        spans = [
            Span("scatter", index, t, t + 5 * us),
            Span("forward", index, t + 6 * us, t + 40 * us, lane=0, replica=0, rows=rows,
                 input_shape=[rows, 5], output_shape=[rows, 2], thread="MainThread", order=0),
        ]
        if not train:
            return spans, t + 50 * us
        more, t = _training_spans(index, [rows], t + 50 * us)
        return spans + more, t
    spans = [Span("scatter", index, t, t + 5 * us), Span("replicate", index, t + 6 * us, t + 30 * us)]
    offset, start = 0, t + 32 * us
    chunks = chunk_sizes(rows, devices)
    for replica, n in enumerate(chunks):
        s = start + replica * 3 * us  # threads start one after another, as parallel_apply's do
        spans.append(Span("forward", index, s, s + 20 * us, lane=replica, replica=replica, row_offset=offset,
                          rows=n, input_shape=[n, 5], output_shape=[n, 2], thread=f"Thread-{replica}", order=replica))
        offset += n
    end = start + len(chunks) * 3 * us + 20 * us
    spans.append(Span("apply", index, t + 31 * us, end + us))
    spans.append(Span("gather", index, end + 2 * us, end + 8 * us))
    if not train:
        return spans, end + 10 * us
    more, t = _training_spans(index, chunks, end + 10 * us)
    return spans + more, t


@lru_cache(maxsize=None)
def synthetic(config: RunConfig) -> Trace:
    """What record(config) returns on simulated devices, with made-up times and shuffle order."""
    order = np.random.default_rng(config.seed).permutation(config.data_size) if config.shuffle else np.arange(config.data_size)
    batches: list[Batch] = []
    spans: list[Span] = []
    t = 0.0
    for index, start in enumerate(range(0, config.data_size, config.batch_size)):
        ids = order[start : start + config.batch_size].tolist()
        batches.append(Batch(index, ids, [len(ids), config.input_size], [len(ids), config.output_size]))
        batch_spans, t = _batch_spans(index, len(ids), config.gpus, t, config.train)
        spans.extend(batch_spans)
    return Trace(
        config=config, backend="simulated", torch_version="synthetic", machine_gpus=0, output_device=0,
        lanes=[Lane(i, f"simulated device {i}") for i in range(config.gpus)], batches=batches, spans=spans,
    )


def as_cuda(trace: Trace) -> Trace:
    """The same trace as if real GPUs had recorded it (for the real/simulated wording)."""
    lanes = [Lane(lane.id, f"cuda:{lane.id} NVIDIA H200") for lane in trace.lanes]
    return dataclasses.replace(trace, backend="cuda", lanes=lanes, machine_gpus=len(lanes))

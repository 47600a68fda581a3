"""Every rank's report merged into one Trace: one lane per rank, one batch per step (the rows every rank loaded:
the same on each), one time axis (DDP's: dpviz.engines.ddp.merge, whose clocks, failures, warnings and facts it
shares)."""
from __future__ import annotations

from typing import Any

from dpviz.config import RunConfig
from dpviz.engines.ddp.merge import facts_of, failure_of, memory_of, steps_run, time_axis, warnings_of
from dpviz.trace import Batch, Lane, Span, Trace


def to_trace(config: RunConfig, launched: dict[str, Any], *, backend: str, torch_version: str, machine_gpus: int,
             lane_names: list[str] | None = None) -> Trace:
    """The trace of a tensor-parallel run from what `launch` (or torchrun's ranks, gathered) brought back."""
    ranks = launched["ranks"]
    world = len(ranks)
    offsets, applied, origin = time_axis(ranks)
    failure = failure_of(ranks, launched)
    count, failure = steps_run(config, failure)
    batches = [_batch(config, ranks, launched, step) for step in range(count)]
    spans = []
    for rank, report in enumerate(ranks):
        for phase, step, start, end, offset, rows, in_shape, out_shape, thread, group in report["spans"]:
            if step >= count:
                continue  # after the failing step: the run, as the trace tells it, ended there
            spans.append(Span(phase, step, max(0.0, start - applied[rank] - origin), max(0.0, end - applied[rank] - origin),
                              lane=rank, replica=rank, row_offset=offset, rows=rows, input_shape=in_shape,
                              output_shape=out_shape, thread=thread, group=group))
    spans.sort(key=lambda s: (s.batch, s.start))
    memory = memory_of(ranks, count)
    return Trace(
        config=config, backend=backend, torch_version=torch_version, machine_gpus=machine_gpus, output_device=0,
        lanes=[Lane(r, (lane_names or [])[r] if lane_names else _lane_name(r, backend)) for r in range(world)],
        batches=batches, spans=spans, memory=memory, memory_kind="measured" if backend == "cuda" else "computed",
        failure=failure, warnings=warnings_of(ranks, launched, count),
        facts=facts_of(config, ranks, launched, offsets, applied), engine=config.engine,
    )


def _lane_name(rank: int, backend: str) -> str:
    return f"rank {rank} (process on cuda:{rank})" if backend == "cuda" else f"rank {rank} (process on the CPU)"


def _batch(config: RunConfig, ranks: list[dict], launched: dict, step: int) -> Batch:
    """The step's batch: the rows the ranks loaded (each the same), its shapes as rank 0 saw them."""
    loaded = launched.get("loaded") or [[entry["ids"] for entry in r["steps"]] for r in ranks]
    ids = next((got[step] for got in loaded if step < len(got)), None)
    if ids is None:  # a failure before any rank loaded it: the run's own order, replayed
        ids = _replayed(config, step)
    entry = next((r["steps"][step] for r in ranks if step < len(r["steps"]) and r["steps"][step]["input_shape"]), {})
    shape = list(entry.get("input_shape") or []) or _row_shape(config, len(ids))
    return Batch(step, ids, shape, list(entry.get("output_shape") or []))


def _replayed(config: RunConfig, step: int) -> list[int]:
    """The rows of `step` as the run's DataLoader orders them (its seed), a short last batch included."""
    import torch

    from dpviz.engines.workload.batch_sampler import ShuffledBatches

    per_epoch = -(-config.data_size // config.batch_size)
    order = torch.Generator().manual_seed(config.seed + 1)
    for epoch in range(step // per_epoch + 1):
        torch.empty((), dtype=torch.int64).random_(generator=order)  # the DataLoader iterator's base seed, drawn first
        batches = iter(ShuffledBatches(config.data_size, config.batch_size, config.shuffle, order))
        for index in range(per_epoch):
            rows = next(batches)
            if epoch * per_epoch + index == step:
                return rows
    return []


def _row_shape(config: RunConfig, rows: int) -> list[int]:
    from dpviz.catalogue import MODEL_SPECS, OWN, row_shape

    return [rows, *row_shape(config.model, config.input_size)] if config.model in set(MODEL_SPECS) - {OWN} else [rows]

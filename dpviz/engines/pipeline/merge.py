"""Every stage's report merged into one Trace: one lane per stage, one batch per step (the rows the first stage
loaded), one time axis (DDP's: dpviz.engines.ddp.merge, whose clocks, failures and warnings it shares)."""
from __future__ import annotations


from typing import Any

from dpviz.config import RunConfig
from dpviz.engines.ddp.merge import facts_of, failure_of, memory_of, steps_run, time_axis, warnings_of
from dpviz.engines.pipeline.vocabulary import VOCABULARY
from dpviz.trace import Batch, Lane, Span, Trace
from dpviz.trace.vocabulary import EVERY_LANE

_EVERY_STAGE = set(VOCABULARY.where(EVERY_LANE))  # phases every stage runs: each span names its stage as its replica


def to_trace(config: RunConfig, launched: dict[str, Any], *, backend: str, torch_version: str, machine_gpus: int,
             lane_names: list[str] | None = None) -> Trace:
    """The trace of a pipeline run from what `launch` (or torchrun's ranks, gathered) brought back."""
    ranks = launched["ranks"]
    world = len(ranks)
    offsets, applied, origin = time_axis(ranks)
    failure = failure_of(ranks, launched)
    count, failure = steps_run(config, failure)
    batches = [_batch(config, ranks, launched, step) for step in range(count)]
    spans = []
    for stage, report in enumerate(ranks):
        for phase, step, start, end, offset, rows, in_shape, out_shape, thread, group, microbatch in report["spans"]:
            if step >= count:
                continue  # after the failing step: the run, as the trace tells it, ended there
            spans.append(Span(phase, step, max(0.0, start - applied[stage] - origin), max(0.0, end - applied[stage] - origin),
                              lane=stage, replica=stage if phase in _EVERY_STAGE else None,
                              row_offset=offset, rows=rows, input_shape=in_shape, output_shape=out_shape,
                              microbatch=microbatch))
    spans.sort(key=lambda s: (s.batch, s.start))
    memory = memory_of(ranks, count)
    facts = facts_of(config, ranks, launched, offsets, applied)
    facts.pop("moved", None)  # a stage hands no collective anything: what it sends is in "sent"
    return Trace(
        config=config, backend=backend, torch_version=torch_version, machine_gpus=machine_gpus, output_device=world - 1,
        lanes=[Lane(r, (lane_names or [])[r] if lane_names else _lane_name(r, world, backend)) for r in range(world)],
        batches=batches, spans=spans, memory=memory, memory_kind="measured" if backend == "cuda" else "computed",
        failure=failure, warnings=warnings_of(ranks, launched, count), facts=facts, engine=config.engine,
    )


def _lane_name(stage: int, world: int, backend: str) -> str:
    where = f"process on cuda:{stage}" if backend == "cuda" else "process on the CPU"
    return f"stage {stage + 1} (rank {stage}, {where})"  # stages counted from 1, ranks as torch numbers them


def _batch(config: RunConfig, ranks: list[dict], launched: dict, step: int) -> Batch:
    """The step's batch: the rows the first stage loaded (or the last, whose targets are made from the same rows),
    its input shape as the first stage took it and its output as the last gave it."""
    loaded = launched.get("loaded") or [[entry["ids"] for entry in r["steps"]] for r in ranks]
    ids = next((got[step] for got in (loaded[0], loaded[-1]) if step < len(got)), None)
    if ids is None:  # a failure before either loaded it: the loader's own order, replayed
        ids = _replayed(config, step)
    first = ranks[0]["steps"][step] if step < len(ranks[0]["steps"]) else {}
    last = ranks[-1]["steps"][step] if step < len(ranks[-1]["steps"]) else {}
    shape = list(first.get("input_shape") or []) or _row_shape(config, len(ids))
    return Batch(step, ids, shape, list(last.get("output_shape") or []))


def _row_shape(config: RunConfig, rows: int) -> list[int]:
    from dpviz.catalogue import row_shape

    return [rows, *row_shape(config.model, config.input_size)] if config.model in _catalogue() else [rows]


def _catalogue() -> set[str]:
    from dpviz.catalogue import MODEL_SPECS, OWN

    return set(MODEL_SPECS) - {OWN}


def _replayed(config: RunConfig, step: int) -> list[int]:
    """The rows of `step` as the run's DataLoader orders them (its seed), each epoch's last short batch left out."""
    import torch

    from dpviz.engines.workload.batch_sampler import ShuffledBatches

    per_epoch = config.data_size // config.batch_size
    order = torch.Generator().manual_seed(config.seed + 1)
    for epoch in range(step // per_epoch + 1):
        torch.empty((), dtype=torch.int64).random_(generator=order)  # the DataLoader iterator's base seed, drawn first
        batches = iter(ShuffledBatches(config.data_size, config.batch_size, config.shuffle, order))
        for index in range(per_epoch):
            rows = next(batches)
            if epoch * per_epoch + index == step:
                return rows
    return []

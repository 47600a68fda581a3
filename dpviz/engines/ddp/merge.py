"""Every rank's report merged into one Trace: one lane per rank, one batch per step, one time axis.

Each rank stamps its events with its own `time.perf_counter()`. Ranks on one machine read the same
system-wide clock (CLOCK_MONOTONIC on Linux), so their stamps already share an axis; the offsets measured
at the start (when each rank left a few barriers, against rank 0) are then barrier skew and are kept
as a fact, not applied. Ranks on another machine (under torchrun) are shifted by their measured offset.
"""
from __future__ import annotations

import dataclasses

import statistics
from collections import Counter
from typing import Any

from dpviz.analysis.wording import counted
from dpviz.config import RunConfig
from dpviz.trace import Batch, Failure, Lane, MemorySample, Span, Trace, WarningNote
from dpviz.engines.ranks.launch import consequence
from dpviz.engines.ddp.sampler_rows import per_rank_batch, rank_loads, shard_start


def steps_run(config: RunConfig, failure: Failure | None) -> tuple[int, Failure | None]:
    """How many steps the trace tells (all, or up to the one that failed) and the failure, set on the last of them:
    every process engine's run, as the trace tells it, ends at its failing step."""
    count = config.num_batches if failure is None else min(failure.batch, config.num_batches - 1) + 1
    return count, failure if failure is None else dataclasses.replace(failure, batch=count - 1)


def memory_of(ranks: list[dict[str, Any]], count: int) -> list[MemorySample]:
    """Every rank's memory samples of the first `count` steps, each on its rank's lane. A rank that ran out of
    batches before a sampled step held its state through it, waiting at the end: what it held then is its sample
    after each phase the others ran in that step, so that no cell reads 0 for a rank that holds its model."""
    samples = [MemorySample(step, phase, rank, category, size) for rank, report in enumerate(ranks)
               for step, phase, category, size in report.get("memory", []) if step < count]
    for rank, report in enumerate(ranks):
        waiting = report.get("waiting")
        if not waiting or waiting["step"] >= count:
            continue
        step = waiting["step"]
        phases = dict.fromkeys(m.phase for m in samples if m.batch == step and m.lane != rank)
        samples += [MemorySample(step, phase, rank, category, size) for phase in phases
                    for category, size in waiting["held"]]
    return samples


def to_trace(config: RunConfig, launched: dict[str, Any], *, backend: str, torch_version: str, machine_gpus: int,
             lane_names: list[str] | None = None, together: int = 1) -> Trace:
    """The trace of a DDP run from what `launch` (or torchrun's ranks, gathered) brought back. `together`: how many
    neighbouring ranks load the same rows (FSDP × TP's tensor-parallel group); a step's batch is each such group's
    rows once, group after group."""
    ranks = launched["ranks"]
    world = len(ranks)
    offsets, applied, origin = time_axis(ranks)
    failure = failure_of(ranks, launched)
    loaded = launched.get("loaded") or [[step["ids"] for step in r["steps"]] for r in ranks]
    count, failure = steps_run(config, failure)
    loaders = range(0, world, together)  # the first rank of each group: whose rows the batch holds
    loaded = _fill(config, [loaded[rank] for rank in loaders], count)  # per step, [] where a rank has no batch
    batches, offsets_in_step = _batches(config, [ranks[rank] for rank in loaders], loaded, count)
    spans = []
    for rank, report in enumerate(ranks):
        for phase, step, start, end, _, rows, in_shape, out_shape, thread, group in report["spans"]:
            if step >= count:
                continue  # after the failing step: the run, as the trace tells it, ended there
            spans.append(Span(phase, step, max(0.0, start - applied[rank] - origin), max(0.0, end - applied[rank] - origin),
                              lane=rank, replica=rank, row_offset=offsets_in_step[step][rank // together] if rows else 0,
                              rows=rows,
                              input_shape=in_shape, output_shape=out_shape, thread=thread, group=group))
    spans.sort(key=lambda s: (s.batch, s.start))
    memory = memory_of(ranks, count)
    return Trace(
        config=config, backend=backend, torch_version=torch_version, machine_gpus=machine_gpus, output_device=0,
        lanes=[Lane(r, (lane_names or [])[r] if lane_names else _lane_name(r, backend)) for r in range(world)],
        batches=batches, spans=spans, memory=memory, memory_kind="measured" if backend == "cuda" else "computed",
        failure=failure, warnings=warnings_of(ranks, launched, count),
        facts=facts_of(config, ranks, launched, offsets, applied, world // together),
        engine=config.engine,
    )


def _lane_name(rank: int, backend: str) -> str:
    return f"rank {rank} (process on cuda:{rank})" if backend == "cuda" else f"rank {rank} (process on the CPU)"


def time_axis(ranks: list[dict]) -> tuple[list[float], list[float], float]:
    """(each rank's measured clock offset, the offset applied to its stamps, the run's time 0): when the first rank
    left the last of the clocks' barriers, or the first span when none measured them."""
    offsets, applied = clock_offsets(ranks)
    clocks = [r["clock"][-1] - applied[i] for i, r in enumerate(ranks) if r.get("clock")]
    origin = min(clocks) if clocks else min((s[2] for r in ranks for s in r["spans"]), default=0.0)
    return offsets, applied, origin


def clock_offsets(ranks: list[dict]) -> tuple[list[float], list[float]]:
    """Each rank's clock against rank 0's (the median over the barriers), and the offset applied: the
    measured one for a rank on another host, none for a rank that reads rank 0's clock."""
    base = ranks[0].get("clock") or []
    measured, applied = [], []
    for report in ranks:
        clock = report.get("clock") or []
        offset = statistics.median(t - t0 for t, t0 in zip(clock, base)) if clock and base else 0.0
        measured.append(offset)
        applied.append(offset if report.get("host") != ranks[0].get("host") else 0.0)
    return measured, applied


def _fill(config: RunConfig, loaded: list[list[list[int]]], count: int) -> list[list[list[int]]]:
    """Each rank's rows in every step up to `count`, as a list per step (empty when the rank has no batch
    in it); where a failure kept a rank from loading its rows, what its sampler or shard gives it."""
    world = len(loaded)
    steps = _plan(config, world)
    per_epoch = len(steps) // config.epochs
    filled = []
    for rank, got in enumerate(loaded):
        mine = [step for step in range(count) if steps[step][rank]]
        rows = dict(zip(mine, got))
        for step in mine[len(got):]:
            rows[step] = _expected(config, world, rank, step, steps, per_epoch)
        filled.append([rows.get(step, []) for step in range(count)])
    return filled


def _plan(config: RunConfig, world: int) -> list[list[int]]:
    return rank_loads(config.data_size, config.batch_size, world, batch_per_process=config.batch_per_process,
                      drop_last=config.drop_last, uneven=config.uneven, epochs=config.epochs)


def _expected(config: RunConfig, world: int, rank: int, step: int, steps: list[list[int]], per_epoch: int) -> list[int]:
    """The rows rank `rank` loads in `step`: from its shard, or from torch's DistributedSampler."""
    from torch.utils.data import DistributedSampler

    epoch, within = divmod(step, per_epoch)
    before = sum(steps[epoch * per_epoch + s][rank] for s in range(within))
    if config.uneven:
        indices = list(range(shard_start(config.data_size, world, rank), config.data_size))
    else:
        sampler = DistributedSampler(range(config.data_size), num_replicas=world, rank=rank, shuffle=config.shuffle,
                                     seed=config.seed, drop_last=config.drop_last)
        sampler.set_epoch(epoch if config.set_epoch else 0)
        indices = list(sampler)
    return indices[before:before + steps[step][rank]]


def _batches(config: RunConfig, ranks: list[dict], loaded: list[list[list[int]]], count: int):
    """One batch per step: the step's rows rank after rank; and where each rank's rows start in it."""
    batches, offsets = [], []
    for step in range(count):
        ids, starts = [], []
        for rank in range(len(ranks)):
            starts.append(len(ids))
            ids += loaded[rank][step]
        shape = _global_shape(config, ranks, step, len(ids), "input_shape")
        out = _global_shape(config, ranks, step, len(ids), "output_shape")
        batches.append(Batch(step, ids, shape, out))
        offsets.append(starts)
    return batches, offsets


def _global_shape(config: RunConfig, ranks: list[dict], step: int, rows: int, key: str) -> list[int]:
    """A rank's shape with its batch dim widened to the step's rows: the global batch."""
    for report in ranks:
        if step < len(report["steps"]) and report["steps"][step][key]:
            shape = list(report["steps"][step][key])
            dim = config.dim if len(shape) > config.dim else 0
            shape[dim] = rows
            return shape
    if key == "output_shape":
        return []
    from dpviz.catalogue import row_shape
    return [rows, *row_shape(config.model, config.input_size)] if config.dim == 0 else \
        [row_shape(config.model, config.input_size)[0], rows, *row_shape(config.model, config.input_size)[1:]]


def failure_of(ranks: list[dict], launched: dict) -> Failure | None:
    """What ended the run: a rank's own error before the errors it caused in the others (closed
    connections, timeouts), the rank that stopped answering, or ranks that finished early while the
    others waited for them (uneven batches without Join)."""
    failures = [(r["rank"], r["failure"]) for r in ranks if r.get("failure")]
    # Ranks that finished their batches and waited for the others at the end, while the others still
    # all-reduced a step: uneven batches without Join. Both sides time out.
    finished = [rank for rank, f in failures if f.get("after_last_step")]
    waiting = [(rank, f) for rank, f in failures if not f.get("after_last_step")]
    if finished and waiting and all(consequence(f["message"]) for _, f in failures):
        rank, f = waiting[0]
        done = len(ranks[finished[0]]["steps"])
        step = f["step"] or 0
        return Failure(step, "Timeout",
                       f"rank {rank} waited {launched['timeout_s']:g} s in an all-reduce of step {counted(step)} while "
                       f"{'rank' if len(finished) == 1 else 'ranks'} {', '.join(map(str, finished))}, out of batches "
                       f"after {done} step{'s' if done != 1 else ''}, waited at the end for the others: the ranks "
                       f"called different collectives, and the run was ended at the timeout.", rank, _cause(f))
    own = [(rank, f) for rank, f in failures if not consequence(f["message"])]
    if own:
        rank, f = own[0]
        return Failure(f["step"] or 0, f["type"], f"rank {rank}: {f['message']}", rank, _cause(f))
    stopped = [rank for rank in launched.get("stopped") or [] if not ranks[rank].get("failure")]
    if stopped:
        rank = stopped[0]
        step = max(0, len(launched.get("loaded", [[]] * (rank + 1))[rank]) - 1)
        return Failure(step, "Timeout", f"rank {rank} stopped answering in step {counted(step)}; the other ranks waited "
                       f"{launched['timeout_s']:g} s in a collective it never joined, and the run was ended.", rank)
    if failures:
        rank, f = failures[0]
        return Failure(f["step"] or 0, f["type"], f"rank {rank}: {f['message']}", rank, _cause(f))
    return None


def _cause(failure: dict) -> str:
    """A rank's error as Python's last traceback line prints it: torch's own words, which the message ("rank 0: ...",
    or the sentence of a timeout) wraps in dpviz's."""
    lines = failure["message"].splitlines()
    return f"{failure['type']}: {lines[0] if lines else ''}"


def warnings_of(ranks: list[dict], launched: dict, count: int) -> list[WarningNote]:
    counted: Counter = Counter()
    first: dict[tuple, int] = {}
    for report in ranks:
        for category, message, step in report.get("warnings", []):
            key = (category, message)
            counted[key] += 1
            first[key] = min(first.get(key, step), step)
    notes = [WarningNote(c, m, min(first[(c, m)], count - 1), n) for (c, m), n in counted.items()]
    for rank, code in enumerate(launched.get("exit_codes", [])):
        if code not in (0, None) and not any(r.get("failure") for r in ranks):
            notes.append(WarningNote("ProcessExit", f"rank {rank}'s process ended with exit code {code} after its run",
                                     max(0, count - 1), 1))
    return notes


def facts_of(config: RunConfig, ranks: list[dict], launched: dict, offsets: list[float], applied: list[float],
             loaders: int | None = None) -> dict:
    """What DDP itself reported and what the launcher measured, as plain values. `loaders`: the ranks that load rows
    of their own (every rank unless groups of them share theirs)."""
    loaders = config.gpus if loaders is None else loaders
    layouts = []
    for step, buckets in ranks[0].get("layouts", []):
        layouts.append({"step": step, "buckets": [{"index": i, "params": list(names), "bytes": size}
                                                  for i, names, size in buckets]})
    facts = {
        "ddp": {
            "per_rank_batch": config.batch_size if config.batch_per_process else per_rank_batch(config.batch_size, loaders),
            "buckets": layouts,
            "reducer": ranks[0].get("reducer", {}),
            "clock_offsets_s": [round(o, 7) for o in offsets],
            "clock_offsets_applied": [o != 0.0 for o in applied],
            "startup_s": [{k: (None if v is None else round(v, 6)) for k, v in r.get("startup", {}).items()} for r in ranks],
            "exit_codes": launched.get("exit_codes", []),
        }
    }
    if any("held" in r for r in ranks):  # what each rank held at the end; None for a rank that never reported
        facts["held"] = [r.get("held") for r in ranks]
    if any("moved" in r for r in ranks):  # the bytes each rank handed its collectives, step by step
        facts["moved"] = [r.get("moved") for r in ranks]
    for key in sorted({key for r in ranks for key in r.get("facts", {})}):  # the engine's own, per rank (FSDP's modules)
        facts[key] = [r.get("facts", {}).get(key) for r in ranks]
    return facts

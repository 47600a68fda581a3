"""The rules of a DDP trace: every rank loaded what its sampler (or its hand-split shard) gives it,
step by step, and all-reduced only in the steps that synchronise. Plain Python: loading a trace needs no torch.

    check_trace(trace)      # TraceError (one sentence) unless the trace is what a DDP run records
"""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.trace.values import TraceError
from dpviz.engines.ddp.sampler_rows import padded_order, padding, per_rank_batch, rank_loads, rank_shares, shard_start


def check_trace(trace: Trace) -> None:
    """Raise TraceError unless `trace` is what a DistributedDataParallel run could have recorded."""
    check_steps(trace)
    held = held_of(trace)
    for rank, mine in enumerate(held or []):
        owned = sum(elements for _, elements in mine["owns"])
        if mine["owns"] != held[0]["owns"] or owned > mine["parameters"]["elements"]:
            raise TraceError(f"rank {rank} steps parameters of {owned:,} elements, rank 0 {stepped(held[0]):,}; under "
                             f"DDP every rank steps the same ones, those of its {mine['parameters']['elements']:,} "
                             "that train.")


def stepped(mine: dict) -> int:
    """Elements of the parameters a rank's optimizer steps (a frozen part, a teacher inside the model: none)."""
    return sum(elements for _, elements in mine["owns"])


def held_of(trace: Trace) -> list[dict] | None:
    """What each rank held at the end of a training run that ended well (facts["held"]), one per rank; None
    when the trace has none to check (forward only, a failure, a trace recorded before it was kept)."""
    held = trace.facts.get("held")
    if held is not None and len(held) != trace.config.gpus:
        raise TraceError(f"facts held has {len(held):,} ranks; the run has {trace.config.gpus:,}.")
    if not held or not trace.config.train or trace.failure is not None or None in held:
        return None
    return held


def check_moved(trace: Trace) -> None:
    """The bytes handed to collectives (facts["moved"]): one list per rank, in the run's steps only."""
    moved = trace.facts.get("moved")
    if moved is None:
        return
    if len(moved) != trace.config.gpus:
        raise TraceError(f"facts moved has {len(moved):,} ranks; the run has {trace.config.gpus:,}.")
    last = max((row[0] for rows in moved if rows for row in rows), default=-1)
    if last >= len(trace.batches):
        raise TraceError(f"facts moved has bytes of step {last + 1:,}; the run has {len(trace.batches):,} steps.")


def check_steps(trace: Trace, together: int = 1) -> None:
    """Raise TraceError unless the steps, rows and buckets are what a DDP run of the config records. `together`: how
    many neighbouring ranks load the same rows (FSDP × TP's tensor-parallel group), each group one sampler's rank."""
    config = trace.config
    if trace.backend not in ("cuda", "cpu"):
        raise TraceError(f"a DistributedDataParallel trace runs on cuda or cpu, got {trace.backend!r}.")
    check_moved(trace)
    ranks = config.gpus // together
    steps = rank_loads(config.data_size, config.batch_size, ranks, batch_per_process=config.batch_per_process,
                       drop_last=config.drop_last, uneven=config.uneven, epochs=config.epochs)
    per_epoch = len(steps) // config.epochs
    complete = trace.failure is None
    loaded: list[list[list[int]]] = [[[] for _ in range(ranks)] for _ in range(config.epochs)]  # [epoch][rank]
    for batch in trace.batches:
        want = steps[batch.index]
        if complete or batch.index < len(trace.batches) - 1:
            if batch.rows != sum(want):
                raise TraceError(f"step {batch.index:,} holds {batch.rows:,} rows; its ranks load "
                                 f"{' + '.join(map(str, want))} = {sum(want):,}.")
            start = 0
            for rank, rows in enumerate(want):
                loaded[batch.index // per_epoch][rank] += batch.sample_ids[start:start + rows]
                start += rows
    if complete:
        for epoch, per_rank in enumerate(loaded):
            _check_epoch(config, epoch, per_rank, ranks)
    _check_forward_rows(trace, steps, together)
    _check_buckets(trace, ranks)


def _check_epoch(config, epoch: int, per_rank: list[list[int]], ranks: int) -> None:
    """One epoch's rows, rank by rank: DistributedSampler's strided shards (every row once, in order
    unless shuffled, then the padding) or, split by hand, each rank's contiguous shard in order."""
    size = config.data_size
    where = f" in epoch {epoch}" if config.epochs > 1 else ""
    if config.uneven:
        shares = rank_shares(size, ranks, uneven=True)
        for rank, rows in enumerate(per_rank):
            start = shard_start(size, ranks, rank)
            if rows != list(range(start, start + shares[rank])):
                raise TraceError(f"rank {rank}'s rows{where} are not its shard {start:,}..{start + shares[rank]:,}.")
        return
    order = padded_order(per_rank, ranks)
    kept = len(order) if config.drop_last else size
    if len(set(order[:kept])) != kept or not set(order[:kept]) <= set(range(size)) \
            or (not config.shuffle and order[:kept] != list(range(kept))):
        raise TraceError(f"the ranks' rows{where} are not DistributedSampler's: read rank after rank, they should be "
                         f"dataset rows once each{' in a shuffled order' if config.shuffle else ' in order'}"
                         f"{'' if config.drop_last else ', then the padding'}.")
    if not config.drop_last and order[size:] != order[:padding(size, ranks)]:
        raise TraceError(f"the padding rows{where} are not the first rows of the sampler's order, as "
                         "DistributedSampler repeats them.")


def _check_forward_rows(trace: Trace, steps: list[list[int]], together: int = 1) -> None:
    """Each rank's forward points at its own rows: the rank's (or its group's) slice of the step."""
    if trace.failure is not None:
        return
    for span in trace.spans:
        if span.phase == "forward":
            want, loader = steps[span.batch], span.lane // together
            start = sum(want[:loader])
            if (span.row_offset, span.rows) != (start, want[loader]):
                raise TraceError(f"rank {span.lane}'s forward in step {span.batch:,} points at rows "
                                 f"{span.row_offset:,}..{span.row_offset + span.rows:,}, not its own "
                                 f"{start:,}..{start + want[loader]:,}.")


def _check_buckets(trace: Trace, ranks: int | None = None) -> None:
    """All-reduces come only in steps that synchronise, and name a bucket of the layout in effect."""
    config = trace.config
    last = config.num_batches - 1
    layouts = trace.facts.get("ddp", {}).get("buckets", [])
    for span in trace.spans:
        if span.phase == "allreduce":
            if (span.batch + 1) % config.accumulate and span.batch != last:
                raise TraceError(f"step {span.batch:,} all-reduces, but with accumulate {config.accumulate} it runs "
                                 "under no_sync and all-reduces nothing.")
            layout = [lay for lay in layouts if lay["step"] <= span.batch]
            if layout and span.group not in {b["index"] for b in layout[-1]["buckets"]}:
                raise TraceError(f"step {span.batch:,} all-reduces bucket {span.group}, which its bucket layout lacks.")
    ddp = trace.facts.get("ddp")
    if ddp is not None:
        ranks = config.gpus if ranks is None else ranks
        batch = config.batch_size if config.batch_per_process else per_rank_batch(config.batch_size, ranks)
        if ddp["per_rank_batch"] != batch:
            raise TraceError(f"facts ddp per_rank_batch {ddp['per_rank_batch']:,} does not follow from batch_size "
                             f"{config.batch_size:,} on {ranks} ranks ({batch:,}).")

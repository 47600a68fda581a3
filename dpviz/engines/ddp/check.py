"""The rules of a DDP trace: every rank loaded what DistributedSampler gives it, step by step, and
all-reduced only in the steps that synchronise. Plain Python: loading a trace needs no torch."""
from __future__ import annotations

from ...trace import Trace
from ...trace_values import TraceError
from .sharding import padded_order, padding, per_rank_batch, step_rows


def check_steps(trace: Trace) -> None:
    """Raise TraceError unless the steps, rows and buckets are what a DDP run of the config records."""
    config = trace.config
    if trace.backend not in ("cuda", "cpu"):
        raise TraceError(f"a DistributedDataParallel trace runs on cuda or cpu, got {trace.backend!r}.")
    ranks = config.gpus
    rows = step_rows(config.data_size, config.batch_size, ranks)
    per_rank: list[list[int]] = [[] for _ in range(ranks)]
    complete = trace.failure is None
    for batch in trace.batches:
        want = rows[batch.index]
        if complete or batch.index < len(trace.batches) - 1:
            if batch.rows != want * ranks:
                raise TraceError(f"step {batch.index:,} holds {batch.rows:,} rows; {ranks} ranks loading "
                                 f"{want:,} each make {want * ranks:,}.")
            for rank in range(ranks):
                per_rank[rank] += batch.sample_ids[rank * want:(rank + 1) * want]
    if complete:
        order = padded_order(per_rank, ranks)
        size = config.data_size
        if sorted(order[:size]) != list(range(size)) or (not config.shuffle and order[:size] != list(range(size))):
            raise TraceError("the ranks' rows are not DistributedSampler's: read rank after rank, they should be "
                             f"every dataset row once{' in a shuffled order' if config.shuffle else ' in order'}, "
                             "then the padding.")
        if order[size:] != order[:padding(size, ranks)]:
            raise TraceError("the padding rows are not the first rows of the sampler's order, as DistributedSampler repeats them.")
    _check_forward_rows(trace)
    _check_buckets(trace)


def _check_forward_rows(trace: Trace) -> None:
    """Each rank's forward points at its own rows: the rank's slice of the step."""
    for span in trace.spans:
        if span.phase == "forward" and trace.failure is None:
            batch = trace.batches[span.batch]
            each = batch.rows // trace.config.gpus
            if (span.row_offset, span.rows) != (span.lane * each, each):
                raise TraceError(f"rank {span.lane}'s forward in step {span.batch:,} points at rows "
                                 f"{span.row_offset:,}..{span.row_offset + span.rows:,}, not its own "
                                 f"{span.lane * each:,}..{(span.lane + 1) * each:,}.")


def _check_buckets(trace: Trace) -> None:
    """All-reduces name a bucket, come only in steps that synchronise, and buckets are as the facts say."""
    config = trace.config
    last = config.num_batches - 1
    layouts = trace.facts.get("ddp", {}).get("buckets", [])
    for span in trace.spans:
        if span.phase == "allreduce":
            if (span.batch + 1) % config.accumulate and span.batch != last:
                raise TraceError(f"step {span.batch:,} all-reduces, but with accumulate {config.accumulate} it runs "
                                 "under no_sync and all-reduces nothing.")
            layout = [lay for lay in layouts if lay["step"] <= span.batch]
            if layout and span.bucket not in {b["index"] for b in layout[-1]["buckets"]}:
                raise TraceError(f"step {span.batch:,} all-reduces bucket {span.bucket}, which its bucket layout lacks.")
    if layouts and per_rank_batch(config.batch_size, config.gpus) != trace.facts["ddp"]["per_rank_batch"]:
        raise TraceError("facts ddp per_rank_batch does not follow from batch_size and the ranks.")

"""The rules of a tensor-parallel trace: every step holds the run's batch (every rank reads all of it), the
collectives' spans name cut modules, and, once it has trained, every rank steps the same parameters, each its
slice. Plain Python: loading a trace needs no torch.

    check_trace(trace)      # TraceError (one sentence) unless the trace is what a tensor-parallel run records
"""
from __future__ import annotations

from dpviz.engines.ddp.check import check_moved, held_of
from dpviz.trace import Trace
from dpviz.trace.values import TraceError


def check_trace(trace: Trace) -> None:
    """Raise TraceError unless `trace` is what parallelize_module over the ranks could have recorded."""
    if trace.backend not in ("cuda", "cpu"):
        raise TraceError(f"a tensor-parallel trace runs on cuda or cpu, got {trace.backend!r}.")
    check_moved(trace)
    config = trace.config
    complete = trace.failure is None
    for batch in trace.batches:
        want = min(config.batch_size, config.data_size - (batch.index % _per_epoch(config)) * config.batch_size)
        if (complete or batch.index < len(trace.batches) - 1) and batch.rows != want:
            raise TraceError(f"step {batch.index:,} holds {batch.rows:,} rows; every rank reads the whole batch of "
                             f"{want:,}.")
    modules = [rank for rank in trace.facts.get("cut_modules") or [] if rank is not None]
    if any(rank != modules[0] for rank in modules):
        raise TraceError("the ranks name different cut modules; parallelize_module cuts the same ones on every rank.")
    named = {m["index"] for m in modules[0]} if modules else set()
    spanned = {s.group for s in trace.spans if s.group is not None}
    if modules and not spanned <= named:
        raise TraceError(f"spans name cut module {min(spanned - named):,}, which facts cut_modules does not list.")
    held = held_of(trace)
    for rank, mine in enumerate(held or []):
        if sorted(name for name, _ in mine["owns"]) != sorted(name for name, _ in held[0]["owns"]):
            raise TraceError(f"rank {rank} steps other parameters than rank 0; under tensor parallelism every rank "
                             "steps its slice of every parameter.")


def _per_epoch(config) -> int:
    return -(-config.data_size // config.batch_size)

"""The rules of a ZeRO-1 trace: DDP's (every rank loads its sampler's rows), and, once it has trained, the
parameters' owners as ZeroRedundancyOptimizer partitions them. Plain Python: loading a trace needs no torch.

    check_trace(trace)      # TraceError (one sentence) unless the trace is what a ZeRO-1 run records
"""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.trace.values import TraceError
from dpviz.engines.ddp.check import check_steps, held_of


def check_trace(trace: Trace) -> None:
    """Raise TraceError unless `trace` is what ZeroRedundancyOptimizer over DDP could have recorded."""
    check_steps(trace)
    check_partition(trace)


def check_partition(trace: Trace) -> None:
    """Every parameter's optimizer state on one rank, whole (ZeroRedundancyOptimizer partitions whole
    parameters), and the shards together the whole model, which every rank still holds."""
    held = held_of(trace)
    if held is None:
        return
    owner: dict[str, int] = {}
    for rank, mine in enumerate(held):
        for name, _ in mine["owns"]:
            if name in owner:
                raise TraceError(f"parameter {name!r} is stepped by rank {owner[name]} and rank {rank}; ZeRO-1 gives "
                                 "each parameter one owner.")
            owner[name] = rank
    owned = sum(elements for mine in held for _, elements in mine["owns"])
    model = held[0]["parameters"]["elements"]
    if owned > model or any(mine["parameters"]["elements"] != model for mine in held):
        raise TraceError(f"the ranks' shards hold parameters of {owned:,} elements between them; each rank holds the "
                         f"model's {model:,}.")

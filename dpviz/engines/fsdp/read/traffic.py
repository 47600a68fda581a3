"""What each FSDP rank sends per step: the all-gathers of the parameters and the reduce-scatter of the gradients."""
from __future__ import annotations


from dpviz.trace import Trace
from dpviz.analysis.memory_compare import held_bytes
from dpviz.analysis.memory_compare import ring_share


def fsdp_wire(trace: Trace) -> list[float | None]:
    """FSDP: the parameters all-gathered in forward, again in backward, the gradients reduce-scattered: (W-1)/W of
    the parameters each, 3(W-1)/W in all when training (1.5x DDP's), one all-gather forward only."""
    parameters = held_bytes(trace, "parameters", sharded=True)
    times = 3 if trace.config.train else 1
    return [None if parameters is None else times * ring_share(len(trace.lanes)) * parameters] * len(trace.lanes)

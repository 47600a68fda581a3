"""What each ZeRO-1 rank sends per step: DDP's all-reduce and the broadcast of its updated shard."""
from __future__ import annotations


from dpviz.trace import Trace
from dpviz.engines.ddp.read.traffic import ddp_wire
from dpviz.analysis.memory_compare import held_bytes
from dpviz.analysis.memory_compare import ring_share


def zero1_wire(trace: Trace) -> list[float | None]:
    """ZeRO-1: DDP's all-reduce, and each updated shard broadcast from its owner: (W-1)/W of the parameters more."""
    parameters = held_bytes(trace, "parameters", sharded=False) if trace.config.train else 0
    return [None if d is None or parameters is None else d + ring_share(len(trace.lanes)) * parameters
            for d in ddp_wire(trace)]

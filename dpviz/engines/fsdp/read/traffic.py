"""What each FSDP rank sends per step: the all-gathers of the parameters (in forward, and again in backward) and
the reduce-scatter of the gradients."""
from __future__ import annotations

from dpviz.analysis.memory_compare import held_bytes, ring_share
from dpviz.analysis.traffic import Move
from dpviz.trace import Trace

# Each collective a step may run, by the phase that runs it: what it moves, its kind, whether for backward.
COLLECTIVES = (("gather", "parameters gathered", "all-gather", False),
               ("gather_backward", "parameters gathered again", "all-gather", True),
               ("reduce_scatter", "gradients", "reduce-scatter", True))


def fsdp_traffic(trace: Trace) -> list[Move]:
    """Per step and rank, for each collective the step ran: a ring's (W-1)/W of the parameters' bytes (the ranks'
    shards summed, FSDP's padding included), sent and received alike; training, 3(W-1)/W in all, 1.5× DDP's."""
    parameters = held_bytes(trace, "parameters", sharded=True)
    if not parameters:
        return []
    share = round(ring_share(len(trace.lanes)) * parameters)
    moves = []
    for batch in trace.batches:
        for phase, what, kind, backward in COLLECTIVES:
            for lane in sorted({s.lane for s in trace.spans_of(batch.index, phase)}):
                moves.append(Move(batch.index, lane, what, share, share, kind, backward))
    return moves

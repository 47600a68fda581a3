"""What each FSDP rank sends per step: the all-gathers of the parameters (in forward, and again in backward) and
the reduce-scatter of the gradients; on a mesh, also the tensor-parallel all-reduces of the activations."""
from __future__ import annotations

from dpviz.analysis.memory_compare import ring_share
from dpviz.analysis.traffic import Move
from dpviz.engines.fsdp.mesh import DP_SHARD, group_of
from dpviz.engines.tp.read.traffic import all_reduce_moves
from dpviz.trace import Trace

# Each collective a step may run, by the phase that runs it: what it moves, its kind, whether for backward.
COLLECTIVES = (("gather", "parameters gathered", "all-gather", False),
               ("gather_backward", "parameters gathered again", "all-gather", True),
               ("reduce_scatter", "gradients", "reduce-scatter", True))


def fsdp_traffic(trace: Trace) -> list[Move]:
    """Per step and rank, for each collective the step ran: a ring's (W-1)/W of the parameters' bytes (the shards of
    the rank's dp_shard group summed, FSDP's padding included), sent and received alike; training, 3(W-1)/W in all,
    1.5× DDP's. On a mesh W is the dp_shard group's ranks, and each rank also all-reduces activations inside its
    tensor-parallel group, as the tp engine's ranks do."""
    held = trace.facts.get("held")
    if not held or None in held:
        return []
    ranks, tp = trace.config.gpus, trace.config.tp
    moves = []
    for batch in trace.batches:
        for phase, what, kind, backward in COLLECTIVES:
            for lane in sorted({s.lane for s in trace.spans_of(batch.index, phase)}):
                group = group_of(lane, ranks, tp, DP_SHARD)
                share = round(ring_share(len(group)) * sum(held[r]["parameters"]["bytes"] for r in group))
                moves.append(Move(batch.index, lane, what, share, share, kind, backward))
    return moves + (all_reduce_moves(trace, tp) if tp > 1 else [])

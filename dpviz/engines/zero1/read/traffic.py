"""What each ZeRO-1 rank sends per step: DDP's all-reduce of the gradients, then the broadcast of every updated
shard from the rank that owns it."""
from __future__ import annotations

from dpviz.analysis.memory_compare import held_bytes, ring_share
from dpviz.analysis.traffic import Move
from dpviz.analysis.traffic_model import StepSizes
from dpviz.engines.ddp.read.traffic import ddp_traffic, moves_at as ddp_moves_at
from dpviz.trace import Trace


def zero1_traffic(trace: Trace) -> list[Move]:
    """DDP's moves, and in each step that stepped the optimizer, every rank's share of the shards' broadcasts: each
    owner sends its updated shard to the others, so a rank sends and receives (W-1)/W of the parameters, as a ring
    all-gather would (the count sharded-facts.md gives for ZeRO-1's extra traffic)."""
    moves = ddp_traffic(trace)
    parameters = held_bytes(trace, "parameters", sharded=False)
    if not trace.config.train or not parameters:
        return moves
    share = round(ring_share(len(trace.lanes)) * parameters)
    for batch in trace.batches:
        for lane in sorted({s.lane for s in trace.spans_of(batch.index, "step")}):
            # Even here, though each owner sends its own shard (uneven: whole parameters), and a rank that owns none
            # sends nothing: the Compare says the figure is an average.
            moves.append(Move(batch.index, lane, "updated shards", share, share, "broadcast", evened=True))
    return moves


def moves_at(sizes: StepSizes, ranks: int) -> list[tuple[int, int]]:
    """(sent, received) bytes per rank in one step: DDP's, and training, (W-1)/W of the parameters for the shards'
    broadcasts (the gradients' bytes: every parameter that learns has one)."""
    moves = ddp_moves_at(sizes, ranks)
    if not sizes.train or ranks < 2:
        return moves
    share = round(ring_share(ranks) * sizes.gradients)
    return [(sent + share, received + share) for sent, received in moves]

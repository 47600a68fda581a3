"""What each tensor-parallel rank sends per step: a ring all-reduce of every tensor it handed one, 2(W-1)/W of its
bytes sent and as many received (the activations' in forward, their gradients' in backward)."""
from __future__ import annotations

from dpviz.analysis.traffic import Move, ledger
from dpviz.engines.ddp.read.one_step import moved_at
from dpviz.trace import Trace

# Each collective the ranks write down: (what it moves, for backward).
COLLECTIVES = {"all-reduce (forward)": ("activations", False), "all-reduce (backward)": ("activations' gradients", True)}


def ring(ranks: int, size: int) -> int:
    """What one rank of a ring all-reduce sends (and receives) of a tensor of `size` bytes: 2(W-1)/W of it."""
    return round(2 * (ranks - 1) / ranks * size) if ranks > 1 else 0


def tp_traffic(trace: Trace) -> list[Move]:
    """Per step, rank and pass: a ring's share of the bytes the rank handed its all-reduces (facts["moved"])."""
    return all_reduce_moves(trace, len(trace.lanes))


def all_reduce_moves(trace: Trace, ranks: int) -> list[Move]:
    """The all-reduces' moves, each a ring of `ranks` (the tensor-parallel group: every rank, or a mesh's row)."""
    moves = []
    for batch in trace.batches:
        for collective, handed in moved_at(trace, batch.index).items():
            if collective in COLLECTIVES:
                what, backward = COLLECTIVES[collective]
                for lane, size in sorted(handed.items()):
                    share = ring(ranks, size)
                    moves.append(Move(batch.index, lane, what, share, share, "all-reduce", backward))
    return moves


def tp_model_bytes(trace: Trace) -> tuple[int | None, int | None]:
    """Rank 0's parameters and gradients: its slices and the whole parts."""
    return ledger(trace, 0, "parameters"), ledger(trace, 0, "gradients")

"""What DDP moves between ranks: the buffers' broadcast and the gradients' all-reduce, recorded and by formula."""
from __future__ import annotations


from dpviz.analysis.traffic import Move, ledger
from dpviz.analysis.traffic_model import StepSizes, model_bytes
from dpviz.trace import Trace


def ddp_model_bytes(trace: Trace) -> tuple[int | None, int | None]:
    """DDP's gradients are what its buckets hold (the ledger's buckets when the reducer reported none)."""
    buckets = trace.facts.get("ddp", {}).get("buckets", [])
    grads = sum(b["bytes"] for b in buckets[0]["buckets"]) if buckets else ledger(trace, 0, "gradient buckets")
    return ledger(trace, 0, "parameters"), grads


def ddp_traffic(trace: Trace) -> list[Move]:
    """A ring all-reduce sends and receives 2(K-1)/K of the gradient bytes on every rank; rank 0's
    buffers go to every other rank before each forward that broadcasts them."""
    sizes = model_bytes(trace)
    return [move for batch in trace.batches for move in ddp_step_traffic(trace, batch.index, sizes)]


def ddp_step_traffic(trace: Trace, step: int, sizes: tuple[int | None, int | None] | None = None) -> list[Move]:
    """ddp_traffic's moves of one step (a view of one step need not count a long run's every step)."""
    params, grads = sizes if sizes is not None else model_bytes(trace)
    ranks = len(trace.lanes)
    buffers = (params or 0) - (grads or 0)
    moves = []
    reduced = {s.lane for s in trace.spans_of(step, "allreduce")}
    for lane in reduced:
        share = round(2 * (ranks - 1) / ranks * sum(_bucket_bytes(trace, step)))
        moves.append(Move(step, lane, "all-reduce", share, share, "all-reduce", True))
    broadcast = {s.lane for s in trace.spans_of(step, "buffers")}
    if buffers > 0 and broadcast and ranks > 1:
        for lane in broadcast:
            moves.append(Move(step, lane, "buffers", buffers * (ranks - 1) if lane == 0 else 0, 0 if lane == 0 else buffers,
                              "broadcast"))
    return moves


def _bucket_bytes(trace: Trace, step: int) -> list[int]:
    layouts = [lay for lay in trace.facts.get("ddp", {}).get("buckets", []) if lay["step"] <= step]
    return [b["bytes"] for b in layouts[-1]["buckets"]] if layouts else [model_bytes(trace)[1] or 0]


def moves_at(sizes: StepSizes, ranks: int) -> list[tuple[int, int]]:
    """(sent, received) bytes per rank in one step (training: the all-reduce; every forward: the buffers)."""
    if ranks < 2:
        return [(0, 0)] * ranks
    share = round(2 * (ranks - 1) / ranks * sizes.gradients) if sizes.train else 0
    moves = [(share, share + sizes.buffers) for _ in range(ranks)]
    moves[0] = (share + sizes.buffers * (ranks - 1), share)
    return moves

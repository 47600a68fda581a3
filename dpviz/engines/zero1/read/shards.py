"""What a ZeRO-1 trace says of its shards, from its facts: the parameters each rank owns (ZeroRedundancyOptimizer's
partition, whole parameters), the optimizer state it holds for them, and what the broadcasts after a step moved.

    shards(trace)              # [Shard(rank=0, params=["fc.weight"], elements=10, state_bytes=40), ...] or None
    state_words(trace)         # "SGD's momentum buffers", "Adam's two moments"
    broadcasts(trace)          # (step, broadcasts, bytes) of rank 0's first step that broadcast, or None
    split_text(found, human_bytes)   # "rank 0 40 B, rank 1 8 B"

facts["held"] counts each rank's own tensors ("owns": [name, elements] of the parameters its optimizer steps);
facts["moved"] the bytes of the tensors each rank handed its collectives, step by step. No torch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dpviz.trace import Trace


@dataclass(frozen=True)
class Shard:
    """One rank's share of the optimizer: the parameters it owns, and the state it keeps for them."""

    rank: int
    params: list[str]  # the parameters it steps and broadcasts, as the model names them
    elements: int  # their elements
    state_bytes: int  # the optimizer state it holds (for those parameters only)
    model_bytes: int  # the whole model's parameters, which it holds too, as a DDP rank does


def shards(trace: Trace) -> list[Shard] | None:
    """Each rank's shard; None for a run that did not train (no optimizer) or a rank that never reported."""
    held = trace.facts.get("held")
    if not trace.config.train or not held or None in held:
        return None
    return [Shard(rank, [name for name, _ in mine["owns"]], sum(n for _, n in mine["owns"]),
                  mine["optimizer state"]["bytes"], mine["parameters"]["bytes"]) for rank, mine in enumerate(held)]


def state_words(trace: Trace) -> str:
    """What the run's optimizer keeps per parameter, in words."""
    return {"adam": "Adam's two moments", "sgd": "SGD's momentum buffers"}.get(trace.config.optimizer, "its state")


def broadcasts(trace: Trace) -> tuple[int, int, int] | None:
    """(step, broadcasts, bytes) rank 0 handed the broadcasts of each owner's updated parameters in the first step
    that had any (every rank takes part in each: the owner sends, the others receive); None when none was recorded."""
    moved = trace.facts.get("moved")
    rows = sorted(row for row in (moved[0] or []) if row[1] == "broadcast") if moved else []
    return (rows[0][0], rows[0][2], rows[0][3]) if rows else None


SHOWN = 4  # ranks named one by one; past them, the most and the least


def split_text(found: list[Shard], amount: Callable[[int], str]) -> str:
    """'rank 0 40 B, rank 1 8 B': the optimizer state each rank holds, each amount as `amount` writes it; past
    SHOWN ranks, the most and the least."""
    if len(found) <= SHOWN:
        return ", ".join(f"rank {s.rank} {amount(s.state_bytes)}" for s in found)
    most, least = max(found, key=lambda s: s.state_bytes), min(found, key=lambda s: s.state_bytes)
    return (f"from {amount(most.state_bytes)} on rank {most.rank} down to {amount(least.state_bytes)} "
            f"on rank {least.rank}")

"""The optimizer every ZeRO-1 rank steps: torch's ZeroRedundancyOptimizer around the run's own optimizer.

    stepped, holder = sharded(model.parameters(), torch.optim.Adam, {"lr": 0.01}, passed)

ZeroRedundancyOptimizer partitions whole parameters between the ranks (the largest first, each to the rank
that holds the fewest elements so far); each rank's local optimizer (`holder`) keeps the state of its own
parameters only and steps them, then `step()` broadcasts every shard from its owner, so that every rank
ends the step with the same parameters, as under DDP. `passed` is told the bytes of the tensors each of
those broadcasts is handed, on every rank (the owner sends them, the others receive into them).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch.distributed.optim import ZeroRedundancyOptimizer


def sharded(parameters: Iterable[torch.nn.Parameter], kind: type[torch.optim.Optimizer],
            settings: dict[str, Any], passed: Callable[..., None] | None = None
            ) -> tuple[ZeroRedundancyOptimizer, torch.optim.Optimizer]:
    """ZeroRedundancyOptimizer over `kind`, and the local optimizer that holds this rank's shard of the state."""
    optimizer = ZeroRedundancyOptimizer(parameters, optimizer_class=kind, **settings)
    if passed is not None:
        _count_broadcasts(optimizer, passed)
    return optimizer, optimizer.optim


def broadcast_tensors(optimizer: ZeroRedundancyOptimizer, owner: int) -> list[torch.Tensor]:
    """The tensors `_broadcast_params_from_rank(owner)` hands dist.broadcast, taken as it takes them: the
    owner's bucket on each device when parameters are kept as bucket views, else each of its parameters."""
    if optimizer.parameters_as_bucket_view:
        return [buckets[owner] for buckets in optimizer._buckets]
    return [p.data for group in optimizer._partition_parameters()[owner] for p in group["params"]]


def _count_broadcasts(optimizer: ZeroRedundancyOptimizer, passed: Callable[..., None]) -> None:
    """Wrap the instance's broadcast of one owner's shard (what step() calls for every rank), unchanged."""
    broadcast = optimizer._broadcast_params_from_rank

    def counted(owner: int):
        handles = broadcast(owner)
        tensors = broadcast_tensors(optimizer, owner)
        passed("broadcast", sum(t.numel() * t.element_size() for t in tensors), len(tensors))
        return handles

    optimizer._broadcast_params_from_rank = counted

"""The optimizer every ZeRO-1 rank steps: torch's ZeroRedundancyOptimizer around the run's own optimizer.

    stepped, holder = sharded(model.parameters(), torch.optim.Adam, {"lr": 0.01})

ZeroRedundancyOptimizer partitions whole parameters between the ranks (the largest first, each to the rank
that holds the fewest elements so far); each rank's local optimizer (`holder`) keeps the state of its own
parameters only and steps them, then `step()` broadcasts every shard from its owner, so that every rank
ends the step with the same parameters, as under DDP.
"""
from __future__ import annotations

from typing import Any, Iterable

import torch
from torch.distributed.optim import ZeroRedundancyOptimizer


def sharded(parameters: Iterable[torch.nn.Parameter], kind: type[torch.optim.Optimizer],
            settings: dict[str, Any]) -> tuple[ZeroRedundancyOptimizer, torch.optim.Optimizer]:
    """ZeroRedundancyOptimizer over `kind`, and the local optimizer that holds this rank's shard of the state."""
    optimizer = ZeroRedundancyOptimizer(parameters, optimizer_class=kind, **settings)
    return optimizer, optimizer.optim

"""ZeRO-1's plan: DDP's, but each rank keeps the optimizer's state of the parameters it owns only, partitioned as
ZeroRedundancyOptimizer partitions them (whole parameters, the largest first, each to the rank that owns the
fewest elements so far), and broadcasts those parameters once it has stepped them."""
from __future__ import annotations

from dpviz.engines.ddp.plan import plan as ddp_plan
from dpviz.engines.plan_rules import ModelShape, Param, ring_share, state_bytes

# Beside the ZeRO paper's P_os, what torch's ZeroRedundancyOptimizer holds, in one sentence (dpviz.analysis.model_state)
PAPER_NOTE = ("ZeRO-1 here is torch's ZeroRedundancyOptimizer, which shards only the optimizer's state and leaves "
              "every device its whole float32 parameters and gradients (4 + 4 bytes a parameter), where the paper's "
              "P_os (DeepSpeed) keeps float16 parameters and gradients (2 + 2) and shards the float32 master copy "
              "with the optimizer's state (12 / N_d).")


def partition(params: tuple[Param, ...] | list[Param], ranks: int) -> list[list[Param]]:
    """ZeroRedundancyOptimizer._partition_parameters, in plain Python: the trainable parameters sorted by size
    (largest first, a stable sort), each given to the rank with the fewest elements so far (the first such)."""
    owned: list[list[Param]] = [[] for _ in range(ranks)]
    sizes = [0] * ranks
    for param in sorted((p for p in params if p.trainable), key=lambda p: p.numel, reverse=True):
        rank = sizes.index(min(sizes))
        owned[rank].append(param)
        sizes[rank] += param.numel
    return owned


def plan(shape: ModelShape, gpus: int, optimizer: str) -> list[dict[str, int]]:
    devices = ddp_plan(shape, gpus, optimizer)
    for rank, mine in enumerate(partition(shape.params, gpus)):
        devices[rank]["optimizer state"] = state_bytes(mine, optimizer)
        devices[rank]["sent"] += round(ring_share(gpus) * shape.parameter_bytes)
    return devices

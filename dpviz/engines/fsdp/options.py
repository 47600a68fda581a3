"""FSDP's own settings: DDP's that are not its reducer's (no bucket cap, find_unused_parameters, no_sync
accumulation or join, nor the hand split that needs join to end), whether a module's gathered parameters
are freed after its forward, and the tensor-parallel degree of a two-dimensional mesh (mesh.py)."""
from __future__ import annotations

from dataclasses import dataclass

from dpviz.engines.ddp.options import DdpOptions
from dpviz.engines.spec import option, same


@dataclass(frozen=True)
class FsdpOptions:
    batch_per_process: bool = same(DdpOptions, "batch_per_process")
    drop_last: bool = same(DdpOptions, "drop_last")
    epochs: int = same(DdpOptions, "epochs")
    set_epoch: bool = same(DdpOptions, "set_epoch")
    timeout_s: int = same(DdpOptions, "timeout_s")
    optimizer: str = same(DdpOptions, "optimizer")
    precision: str = same(DdpOptions, "precision")
    reshard_after_forward: bool = option(
        True, "fully_shard(reshard_after_forward=True)",
        "On: each module's gathered parameters are freed after its forward and gathered again for its backward. Off: "
        "they stay whole from forward to backward, one all-gather fewer per module for the whole model's parameters "
        "held at once.")
    tp: int = option(
        1, "Tensor-parallel degree (FSDP × TP)",
        "1: FSDP alone. T > 1: a (ranks / T) × T mesh, as torchtitan builds it: each group of T neighbouring ranks cuts "
        "every layer with the model's tensor-parallel plan (parallelize_module), then FSDP shards those slices over the "
        "ranks / T groups (fully_shard on the dp_shard dimension). T must divide the ranks.",
        kind="whole", limits=(1, 8))

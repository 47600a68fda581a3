"""FSDP's own settings: DDP's that are not its reducer's (no bucket cap, find_unused_parameters, no_sync
accumulation or join, nor the hand split that needs join to end), and whether a module's gathered parameters
are freed after its forward."""
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

"""Mixed precision as torch trains with it: forward and the loss compute in bfloat16, while the parameters, their
gradients and the optimizer's state stay float32.

    with autocast(config, "cpu"):               # DataParallel, DDP and ZeRO-1: torch.autocast around forward and loss
    fully_shard(unit, mp_policy=policy(config))  # FSDP2: its MixedPrecisionPolicy casts what it gathers instead

A run that is not mixed gets nothing: no autocast, no policy (FSDP2's default, which casts nothing).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager

import torch

COMPUTE = torch.bfloat16  # what mixed runs compute in: bfloat16 runs on CPUs and needs no loss scaling


def mixed(config: Any) -> bool:
    return config.precision == "mixed"


def autocast(config: Any, device_type: str) -> ContextManager:
    """What forward and the loss run inside. Backward runs outside it, as torch's recipe for autocast says: its ops
    take the dtypes autocast chose in forward, and the gradients of float32 parameters come out float32.
    Autocast's state is the calling thread's own: it touches nothing another run's thread sees."""
    return torch.autocast(device_type, dtype=COMPUTE) if mixed(config) else nullcontext()


def policy(config: Any, module: Any = None) -> Any:
    """FSDP2's policy for a sharded `module` of the run: gather the float32 shards as bfloat16 and compute in it,
    reduce-scatter the gradients in float32 into float32 shards; None (FSDP2's default: no casting) for a run that
    is not mixed. A batch norm keeps float32, its inputs cast to it: its running statistics are float32 buffers
    FSDP2 does not cast, which its kernel will not mix with bfloat16 weights (FSDP1's MixedPrecision leaves batch
    norms out by default for the same reason)."""
    if not mixed(config):
        return None
    from torch.distributed.fsdp import MixedPrecisionPolicy

    keeps = module is not None and keeps_float32(module)
    return MixedPrecisionPolicy(param_dtype=torch.float32 if keeps else COMPUTE, reduce_dtype=torch.float32)


def keeps_float32(module: Any) -> bool:
    """Whether a mixed run keeps `module`'s own parameters in float32 while it computes (FSDP2's batch norms)."""
    return isinstance(module, torch.nn.modules.batchnorm._BatchNorm)

"""The bytes of tensors, counted as every engine's memory ledger counts them: a (nested) structure's tensors, a
module's parameters and buffers."""
from __future__ import annotations

from typing import Any

import torch


def nbytes(obj: Any) -> int:
    """Bytes of every tensor in a (nested) structure; other objects count nothing."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v) for v in obj)
    return 0


def stored_bytes(tensors: Any) -> int:
    """Bytes torch allocated under `tensors`: each storage once, whole, however many tensors view it. What
    nbytes() misses: FSDP2's shards view storages padded to a multiple of the ranks (a last rank's empty shard
    still has its rows allocated), and the gradients of one sharded module are views of one reduce-scatter output."""
    seen: dict[tuple[str, int], int] = {}
    for tensor in tensors_in(tensors):
        storage = tensor.untyped_storage()
        seen[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor in a (nested) structure of dicts, lists and tuples, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_in(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in tensors_in(v)]
    return []


def module_bytes(module: torch.nn.Module) -> int:
    """Parameters and buffers of a module, or of a replica (whose parameters are plain tensors)."""
    tensors = {id(t): t for m in module.modules() for t in (
        *m._parameters.values(), *m._buffers.values(), *getattr(m, "_former_parameters", {}).values()
    ) if t is not None}
    return nbytes(list(tensors.values()))

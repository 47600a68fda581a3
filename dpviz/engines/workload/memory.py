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


def module_bytes(module: torch.nn.Module) -> int:
    """Parameters and buffers of a module, or of a replica (whose parameters are plain tensors)."""
    tensors = {id(t): t for m in module.modules() for t in (
        *m._parameters.values(), *m._buffers.values(), *getattr(m, "_former_parameters", {}).values()
    ) if t is not None}
    return nbytes(list(tensors.values()))

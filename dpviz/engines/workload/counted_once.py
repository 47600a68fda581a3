"""Each tensor counted once in a step's ledger: the leaves' outputs as activations, and the model's own output (a leaf's
output, most often: the last Linear's) moved out of them into "output and loss", where a class reads what forward
returns.

    leaves = LeafOutputs()
    leaves.add(output)      # a leaf's output: the bytes it adds (0 for a tensor, or a view of one, already counted)
    leaves.take(returned)   # the bytes of counted outputs that forward returned: no longer activations
    leaves.clear()          # the step ended: its graph is freed

A storage is known by its address only while a tensor on it is alive: a weak reference to the tensor counted says
so, and an address whose tensor has gone (memory the allocator gave back, then handed a later leaf) is counted anew.
"""
from __future__ import annotations

import weakref
from typing import Any

import torch

from dpviz.engines.workload.memory import tensors_in


class LeafOutputs:
    """The leaf outputs one step has counted, by storage: bytes, and the tensor that holds the storage alive."""

    def __init__(self) -> None:
        self._counted: dict[tuple[str, int], tuple[weakref.ref, int]] = {}

    @staticmethod
    def _key(tensor: torch.Tensor) -> tuple[str, int] | None:
        """Where its bytes live; None for a tensor with no storage of its own to know it by (a sparse one, a
        tensor subclass's wrapper), which is counted at its own size, as nbytes() counts it."""
        if tensor.layout != torch.strided:
            return None
        try:
            return str(tensor.device), tensor.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return None

    def _alive(self, key: tuple[str, int]) -> int | None:
        """Bytes counted on this storage while a tensor counted on it lives; None when none does."""
        found = self._counted.get(key)
        if found is None or found[0]() is None:
            return None
        return found[1]

    def add(self, output: Any) -> int:
        """Count a leaf's output (a tensor or a structure of them); the bytes it adds to what is counted. A view of a
        counted tensor (nn.Flatten's, nn.Identity's, Dropout's in eval) adds only what it spans beyond it."""
        added = 0
        for tensor in tensors_in(output):
            key, size = self._key(tensor), tensor.numel() * tensor.element_size()
            if key is None:
                added += size
                continue
            before = self._alive(key) or 0
            if size > before:
                self._counted[key] = (weakref.ref(tensor), size)
                added += size - before
        return added

    def take(self, returned: Any) -> int:
        """The bytes counted for storages that `returned` (forward's output) lives on, no longer counted here."""
        taken = 0
        for tensor in tensors_in(returned):
            key = self._key(tensor)
            if key is not None and self._alive(key) is not None:
                taken += self._counted.pop(key)[1]
        return taken

    def clear(self) -> None:
        self._counted.clear()

"""DataParallel's scatter and gather rules, on CPU tensors that stand in for devices.

A line-for-line counterpart of torch/nn/parallel/scatter_gather.py and the Scatter/Gather Functions in
_functions.py; a chunk "moved" to another device is a CPU copy. tests/test_scatter.py checks every rule
against torch's own code. Chunks and concatenations stay in autograd, so backward splits the gradient with the
forward's chunk sizes, as Gather.backward does.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import torch

from dpviz.engines.dp.chunking import chunk_sizes  # noqa: F401  the split rule, named here with the others

SCALAR_GATHER_WARNING = (
    "Was asked to gather along dimension 0, but all input tensors were scalars; "
    "will instead unsqueeze and return a vector."
)


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_asdict") and hasattr(obj, "_fields")


def scatter(inputs: Any, target_devices: Sequence[int], dim: int = 0) -> Any:
    """Split tensors into one chunk per device; share every other object by reference."""

    def scatter_map(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            if obj.dim() == 0:
                raise RuntimeError("chunk expects at least a 1-dimensional tensor")
            # comm.scatter copies each chunk to its own device and skips only a chunk that is already
            # on the input's device. The batch stands on device_ids[0] here, so chunk 0 stays a view and
            # the others are copies: in-place ops in replicas 1.. must not reach the caller's tensor or
            # share its autograd version counter.
            chunks = obj.chunk(len(target_devices), dim)
            return tuple(c if i == 0 else c.clone() for i, c in enumerate(chunks))
        # zip() without strict: the shortest piece decides how many replicas run.
        if _is_namedtuple(obj):
            return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, tuple) and len(obj) > 0:
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in target_devices]

    # scatter_map's closure holds the cell that holds scatter_map: a reference cycle that only the
    # garbage collector would free, every call. Clearing the name empties the cell, as torch's
    # scatter does (scatter_gather.py, scatter: `finally: scatter_map = None`).
    try:
        return scatter_map(inputs)
    finally:
        scatter_map = None  # type: ignore[assignment]


def scatter_kwargs(
    inputs: tuple[Any, ...], kwargs: dict[str, Any] | None, target_devices: Sequence[int], dim: int = 0
) -> tuple[tuple[Any, ...], tuple[dict[str, Any], ...]]:
    """Scatter positional and keyword arguments, padding the shorter list exactly as torch does."""
    scattered_inputs = scatter(inputs, target_devices, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_devices, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(inputs):  # torch compares with the raw positional tuple here
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def _gather_tensors(tensors: Sequence[torch.Tensor], dim: int) -> torch.Tensor:
    if all(t.dim() == 0 for t in tensors) and dim == 0:
        warnings.warn(SCALAR_GATHER_WARNING, stacklevel=3)
        tensors = [t.view(1) for t in tensors]
    _check_gather_shapes(tensors, dim)
    return torch.cat(tensors, dim)


def _check_gather_shapes(tensors: Sequence[torch.Tensor], dim: int) -> None:
    # The checks (and words) of comm.cpp's gather, which run before any copy.
    first = tensors[0]
    if first.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -first.dim() <= dim < first.dim():
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-first.dim()}, {first.dim() - 1}], but got {dim})"
        )
    dim %= first.dim()
    expected = list(first.shape)
    for i, tensor in enumerate(tensors):
        if tensor.dim() != len(expected):
            raise RuntimeError(
                f"Expected all input tensors to have the same number of dimensions, but tensor at index {i}"
                f"has {tensor.dim()} dimensions, (expected {len(expected)})"
            )
        expected[dim] = tensor.shape[dim]
        if list(tensor.shape) != expected:
            raise RuntimeError(
                f"Input tensor at index {i} has invalid shape {list(tensor.shape)}, but expected {expected}"
            )


def gather(outputs: Sequence[Any], dim: int = 0) -> Any:
    """Concatenate per-replica outputs in replica order, walking structures as torch's gather does."""

    def gather_map(outputs: Sequence[Any]) -> Any:
        out = outputs[0]
        if isinstance(out, torch.Tensor):
            return _gather_tensors(outputs, dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outputs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outputs])) for k in out)
        if _is_namedtuple(out):
            return type(out)._make(map(gather_map, zip(*outputs, strict=True)))
        return type(out)(map(gather_map, zip(*outputs, strict=True)))

    # The same closure cycle as scatter_map's, broken the same way (scatter_gather.py, gather).
    try:
        return gather_map(outputs)
    finally:
        gather_map = None  # type: ignore[assignment]

"""How a batch is handed to the model: as one tensor (the tutorial) or in the shapes real code uses.

    module = wrap("dict", core, dim=0)         # a module whose forward takes that form
    args, kwargs = call_args("dict", x, ids, dim=0)
    output = parallel(*args, **kwargs)
    describe(args, kwargs, piece_args, piece_kwargs)   # what one replica got of each argument

DataParallel splits every tensor it finds in tuples, lists and dicts along `dim`, and hands every
other object to each replica whole: the forms below show both, and `list` and `kwargs` the two ways
that goes wrong (a per-row Python list is not split; a keyword makes extra replicas with no
positional arguments when a batch has fewer chunks than devices).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch import nn

from dpviz.catalogue import INPUT_SPECS
from dpviz.engines.workload.models import HIDDEN

LABELS = {name: spec.label for name, spec in INPUT_SPECS.items()}
# Names of the positional arguments of each form's forward, for naming what a replica received.
POSITIONAL = {name: spec.positional for name, spec in INPUT_SPECS.items()}
SCALE = 0.5


def _weighted(x: torch.Tensor, weight: torch.Tensor, dim: int) -> torch.Tensor:
    """Scale each row of `x` (rows along `dim`) by its weight."""
    shape = [1] * x.dim()
    shape[dim] = -1
    return x * weight.reshape(shape)


class TupleInput(nn.Module):
    """forward((x, weight)): one tuple argument holding two per-row tensors."""

    def __init__(self, core: nn.Module, dim: int):
        super().__init__()
        self.core, self.dim = core, dim

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x, weight = batch
        return self.core(_weighted(x, weight, self.dim))


class DictInput(TupleInput):
    """forward({"x": x, "weight": weight}): one dict argument."""

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.core(_weighted(batch["x"], batch["weight"], self.dim))


class KwargsInput(TupleInput):
    """forward(x, scale=...): a float keyword, which DataParallel copies to every device it has."""

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.core(x * scale)


class ListInput(TupleInput):
    """forward(x, row_ids): a Python list of the batch's dataset row ids, as code passes names or
    lengths. DataParallel does not split it: every replica gets all of them."""

    def forward(self, x: torch.Tensor, row_ids: list[int]) -> torch.Tensor:
        return self.core(x)


class HiddenInput(TupleInput):
    """forward(x, h0): a GRU's initial hidden state, whose batch is on dim 1 whatever batch_first says."""

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        return self.core(x, h0)


WRAPPERS = {"tuple": TupleInput, "dict": DictInput, "kwargs": KwargsInput, "list": ListInput, "hidden": HiddenInput}


def wrap(form: str, core: nn.Module, dim: int) -> nn.Module:
    """A module taking input form `form`; the tensor form is the core itself, as in the tutorial."""
    if form == "tensor":
        return core
    if form not in WRAPPERS:
        raise ValueError(f"inputs must be one of {', '.join(LABELS)}, got {form!r}")
    return WRAPPERS[form](core, dim)


def call_args(form: str, x: torch.Tensor, ids: list[int], dim: int) -> tuple[tuple, dict[str, Any]]:
    """Positional and keyword arguments of one call in form `form`, for a batch `x` (rows on `dim`)."""
    rows = x.shape[dim]
    if form == "tensor":  # the tutorial's: nothing made beside the batch, which a run does every batch
        return (x,), {}
    weight = torch.linspace(0.5, 1.5, rows, device=x.device)
    if dim == 1:
        weight = weight.reshape(1, rows)  # every tensor is split along dim 1, the weight too
    if form == "tuple":
        return ((x, weight),), {}
    if form == "dict":
        return ({"x": x, "weight": weight},), {}
    if form == "kwargs":
        return (x,), {"scale": SCALE}
    if form == "list":
        return (x, list(ids)), {}
    if form == "hidden":
        return (x, torch.zeros(1, rows, HIDDEN, device=x.device)), {}
    raise ValueError(f"inputs must be one of {', '.join(LABELS)}, got {form!r}")


def first_tensor(obj: Any) -> torch.Tensor | None:
    """The first tensor in a nested structure, in the order DataParallel's scatter walks it."""
    if isinstance(obj, torch.Tensor):
        return obj
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        for item in obj:
            found = first_tensor(item)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class Argument:
    """One argument (or part of one) as a replica received it.

    `mode` is "split" for a tensor (a chunk along dim), "shared" for an object every replica gets
    by reference, "copied" for a container of non-tensors rebuilt whole for every replica.
    """

    path: str  # "x", "batch[1]", "batch['weight']", "scale="
    kind: str  # "tensor", "float", "list of int", ...
    shape: list[int]  # a tensor's shape, a container's length, [] for a plain value
    mode: str


def _has_tensor(obj: Any) -> bool:
    return first_tensor(obj) is not None


def _leaves(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    # Walk containers the way scatter does, stopping at containers with no tensor inside: those
    # reach each replica whole, and listing their items one by one would say nothing more.
    if isinstance(obj, dict) and _has_tensor(obj):
        for key, value in obj.items():
            yield from _leaves(value, f"{path}[{key!r}]")
    elif isinstance(obj, (list, tuple)) and _has_tensor(obj):
        for i, value in enumerate(obj):
            yield from _leaves(value, f"{path}[{i}]")
    else:
        yield path, obj


def _kind(obj: Any) -> tuple[str, list[int]]:
    if isinstance(obj, torch.Tensor):
        return "tensor", list(obj.shape)
    if isinstance(obj, (list, tuple, dict)):
        types = sorted({type(v).__name__ for v in (obj.values() if isinstance(obj, dict) else obj)})
        inner = f" of {'/'.join(types)}" if types else ""
        return f"{type(obj).__name__}{inner}", [len(obj)]
    return type(obj).__name__, []


def flatten(args: tuple, kwargs: dict[str, Any], names: tuple[str, ...]) -> list[tuple[str, Any]]:
    """(path, object) of every leaf of a call's arguments, positional ones named by `names`."""
    out: list[tuple[str, Any]] = []
    for i, arg in enumerate(args):
        out += _leaves(arg, names[i] if i < len(names) else f"arg{i}")
    for key, value in kwargs.items():
        out += _leaves(value, f"{key}=")
    return out


def describe(args: tuple, kwargs: dict[str, Any], piece_args: tuple, piece_kwargs: dict[str, Any],
             names: tuple[str, ...]) -> list[Argument]:
    """What one replica received (`piece_args`, `piece_kwargs`) of the caller's `args` and `kwargs`."""
    original = dict(flatten(args, kwargs, names))
    described = []
    for path, leaf in flatten(piece_args, piece_kwargs, names):
        kind, shape = _kind(leaf)
        if isinstance(leaf, torch.Tensor):
            mode = "split"
        else:
            mode = "shared" if original.get(path) is leaf else "copied"
        described.append(Argument(path, kind, shape, mode))
    return described

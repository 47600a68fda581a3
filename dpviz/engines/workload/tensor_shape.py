"""What a tensor-parallel plan cuts of a model (dpviz.engines.plan_rules.TensorShape), measured on the meta device by
running forward once: each module the plan names with what it took and gave, each cut parameter's style, and which
of the tensors autograd saves lie inside the cut.

A tensor lies inside the cut (each rank holds 1/T of it) when a column-wise Linear made it, or an op outside a
row-wise Linear made it from one that does (the GELU on the hidden features, attention on q, k and v of whole heads),
or it is a view of one that does; a row-wise Linear's output is whole again (its partial sums all-reduced). That is
Megatron's rule for activations without sequence parallelism, followed storage by storage as torch dispatches ops.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from dpviz.engines.plan_rules import CutModule, TensorShape
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.engines.workload.memory import nbytes
from dpviz.splitting import matches

CUTTING = ("colwise", "rowwise")


def tensor_shape(meta: nn.Module, example: Any, plan: dict[str, str], names: dict[int, str],
                 heads: int = 0) -> TensorShape:
    """The cut of `meta` (a model on the meta device) under `plan` (module path to style), over `example`."""
    styled = {}
    for path, module in meta.named_modules():
        style = next((s for pattern, s in plan.items() if path and matches(pattern, path) and s != "whole"), None)
        if style is not None:
            styled[path] = (module, style)
    running: list[str] = []  # the styles of the cut Linears running now, innermost last
    split: set[int] = set()  # storages inside the cut
    kept: list[torch.Tensor] = []  # every tensor marked, alive: a storage's key is never reused while we look
    modules: list[CutModule] = []
    saved: dict[int, tuple[int, bool]] = {}

    def key(tensor: torch.Tensor) -> int:
        return tensor.untyped_storage()._cdata

    class Cut(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            inner = running[-1] if running else None
            made_split = inner == "colwise" or (inner != "rowwise" and any(
                key(t) in split for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)))
            if made_split:
                for tensor in tree_flatten(out)[0]:
                    if isinstance(tensor, torch.Tensor):
                        split.add(key(tensor))
                        kept.append(tensor)
            return out

    def before(path: str, style: str):
        def hook(module, args):
            taken = first_tensor(args)
            modules.append(CutModule(path, style, type(module).__name__, nbytes(taken) if taken is not None else 0, 0,
                                     bool(taken is not None and taken.requires_grad)))
            if style in CUTTING:
                running.append(style)
        return hook

    def after(path: str, style: str):
        def hook(module, args, output):
            if style in CUTTING:
                running.pop()
            index = max(i for i, m in enumerate(modules) if m.path == path)
            given = first_tensor(output)
            modules[index] = dataclasses.replace(modules[index], output_bytes=nbytes(given) if given is not None else 0)
        return hook

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        base = tensor._base if tensor._base is not None else tensor
        if not isinstance(base, nn.Parameter):  # as shapes.measure counts them: each storage once, weights not
            saved[id(base)] = (base.numel() * base.element_size(), key(base) in split)
            kept.append(base)
        return tensor

    handles = []
    for path, (module, style) in styled.items():
        handles.append(module.register_forward_pre_hook(before(path, style)))
        handles.append(module.register_forward_hook(after(path, style)))
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), Cut():
            meta(*example.args, **example.kwargs) if hasattr(example, "args") else meta(example)
    finally:
        for handle in handles:
            handle.remove()
    cut = {path for path, (_, style) in styled.items() if style in CUTTING}
    styles = tuple((names[id(p)], styled[path][1]) for path in styled if path in cut
                   for p in styled[path][0].parameters(recurse=False))
    return TensorShape(styles, tuple(modules), sum(size for size, inside in saved.values() if inside), heads)


"""A model's shape for a plan (dpviz.engines.plan_rules.ModelShape), measured from the model itself: its parameters
(shared ones once, under all their names), its buffers, its FSDP units under dpviz's wrap policy, and what its
example batch costs between forward and backward, found by running forward and backward with saved-tensor hooks.

A model built on the meta device works as it is (nothing is allocated: GPT-2's or a 7B decoder's shapes plan in
seconds); a model with real weights is measured on a meta copy of itself, so measuring trains nothing.
"""
from __future__ import annotations

import copy
import dataclasses
from contextlib import nullcontext
from typing import Any, Callable

import torch
from torch import nn

from dpviz.engines.workload.units import TIED, shard_units, tied_groups
from dpviz.engines.plan_rules import Layer, ModelShape, Param
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.engines.workload.memory import nbytes, tensors_in


def measure(model: nn.Module, example: Any, loss: Callable[[Any, Any], torch.Tensor] | None = None, *,
            dtype: torch.dtype | None = None, precision: str = "full", catalogue: str | None = None,
            heads: int | None = None) -> ModelShape:
    """The shape of `model` on `example` (a tensor, or what dpviz.Args passes), in `dtype` if given (its own else).
    `loss(output, example)` makes the scalar backward starts from (the output's mean when not given). `catalogue`:
    the catalogue's name for the model (None for one's own), which says how an engine cuts it into layers.

    `precision` "mixed": float32 parameters, forward and loss under torch.autocast to bfloat16, which meta tensors
    do not dispatch to, so measured on fake CPU tensors (FakeTensorMode: nothing allocated either). What autograd
    saves then holds autocast's bfloat16 copies of the weights its matmuls use (freed by backward, not before);
    `policy` is the model as FSDP2's MixedPrecisionPolicy computes it. Its layers are not measured: the engine that
    cuts models into layers runs in full precision only. ValueError (one sentence) for a model whose parameters are
    not float32 (mixed precision keeps float32 ones).

    In full precision, how its tensor-parallel plan cuts it (`tensor`; dpviz.engines.workload.tensor_shape), `heads`
    the attention heads its q, k and v hold (a catalogue model's own count when not given), or why it has no plan."""
    if precision == "full":
        return _measure(model, example, loss, dtype, catalogue=catalogue, heads=heads)
    own = dtype or _dtype_of(model)
    if own != torch.float32:
        raise ValueError(f"precision mixed keeps the parameters in float32 beside bfloat16 compute, but these are "
                         f"{str(own).replace('torch.', '')}; plan them in float32, or with precision full.")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from dpviz.engines.workload.precision import COMPUTE

    fake = FakeTensorMode(allow_non_fake_inputs=True)  # entered only where tensors are made and run: the model
    shape = _measure(model, example, loss, torch.float32, device="cpu", mode=fake,  # is copied outside it
                     compute=lambda: torch.autocast("cpu", dtype=COMPUTE), catalogue=catalogue, layered=False)
    policy = _measure(model, example, loss, COMPUTE, policy=True, layered=False)
    return dataclasses.replace(shape, precision="mixed", policy=policy)


def _measure(model: nn.Module, example: Any, loss: Callable[[Any, Any], torch.Tensor] | None, dtype: torch.dtype | None,
             *, device: str = "meta", mode: Any = None, compute: Callable[[], Any] = nullcontext,
             policy: bool = False, catalogue: str | None = None, layered: bool = True,
             heads: int | None = None) -> ModelShape:
    meta = _on_meta(model, dtype, device, mode, policy)
    with mode or nullcontext():
        example = _to_meta(example, dtype, device)
    names = {id(p): name for name, p in meta.named_parameters()}
    for tied in tied_groups(meta):
        names[id(meta.get_parameter(tied[0]))] = TIED.join(tied)
    layers, uncut = _layers(meta, example, catalogue, names) if layered else ((), None)
    saved: dict[int, int] = {}
    copies: set[int] = set()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        # Each storage once: a view autograd keeps (a weight's transpose, a slice) holds no memory of its own, and a
        # weight's is the parameter's, already counted (autocast's bfloat16 copy of one is not: it is counted).
        base = _base(tensor)
        if not isinstance(base, nn.Parameter):
            saved[id(base)] = base.numel() * base.element_size()
            if _cast_of_parameter(base):
                copies.add(id(base))
        return tensor

    with mode or nullcontext(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with compute():  # forward and the loss, as a training loop computes them
            output = meta(*example.args, **example.kwargs) if hasattr(example, "args") else meta(example)
            out = first_tensor(output)
            scalar = loss(output, example) if loss is not None else (out.float().mean() if out is not None else None)
        if scalar is not None and scalar.requires_grad:
            scalar.backward()
    tensor, no_tensor = _tensor(model, meta, example, catalogue, names, heads) if layered else (None, None)
    rows = _rows(example)
    params = tuple(Param(names[id(p)], tuple(p.shape), p.element_size(), p.requires_grad, p.grad is not None)
                   for p in meta.parameters())
    units = tuple((name, tuple(names[id(p)] for p in unit.parameters())) for name, unit in shard_units(meta))
    return ModelShape(type(model).__name__, params, nbytes(list(meta.buffers())), units, rows, sum(saved.values()),
                      nbytes(_leaves(example)), nbytes(output), str(dtype or _dtype_of(meta)).replace("torch.", ""),
                      catalogue=catalogue, layers=layers, uncut=uncut,
                      weight_copies=sum(saved[key] for key in copies), tensor=tensor, no_tensor=no_tensor)


def _tensor(model: nn.Module, meta: nn.Module, example: Any, catalogue: str | None, names: dict[int, str],
            heads: int | None) -> tuple[Any, str | None]:
    """How the model's tensor-parallel plan cuts it, or None and why it has no plan (its sentence)."""
    from dpviz.catalogue import MODEL_SPECS
    from dpviz.engines.workload import declared
    from dpviz.engines.workload.tensor_shape import tensor_shape

    try:
        plan = declared.tensor_plan(model, catalogue)
    except ValueError as error:
        return None, str(error)
    if heads is None:
        heads = MODEL_SPECS[catalogue].tensor.heads if catalogue is not None else 0
    return tensor_shape(meta, example, plan, names, heads), None



def _packer(saved: dict[int, int]) -> Callable[[torch.Tensor], torch.Tensor]:
    """A saved-tensors pack hook that writes each storage autograd keeps into `saved` (id -> bytes), once."""
    def pack(tensor: torch.Tensor) -> torch.Tensor:
        # Each storage once: a view autograd keeps (a weight's transpose, a slice) holds no memory of its own, and a
        # weight's is the parameter's, already counted.
        base = _base(tensor)
        if not isinstance(base, nn.Parameter):
            saved[id(base)] = base.numel() * base.element_size()
        return tensor
    return pack


def _base(tensor: torch.Tensor) -> torch.Tensor:
    return tensor._base if tensor._base is not None else tensor


def _layers(meta: nn.Module, example: Any, catalogue: str | None,
            names: dict[int, str]) -> tuple[tuple[Layer, ...], str | None]:
    """The model's layers as the engine that cuts models into them takes them (its plan_layers part), each run on
    what the one before gave, what autograd saves in each measured apart: a stage's activations are its layers'.
    () and that engine's sentence when it cannot cut the model."""
    from dpviz.engines import ENGINES

    cutting = [spec.part("plan_layers") for spec in ENGINES.values() if spec.has("plan_layers")]
    if not cutting:
        return (), None
    one = hasattr(example, "args") and len(example.args) == 1 and not example.kwargs  # dpviz.Args(x) passes x
    x = example.args[0] if one else example
    try:
        layers = cutting[0](meta, x, catalogue)
    except ValueError as error:
        return (), str(error)
    measured = []
    for name, layer in layers:
        saved: dict[int, int] = {}
        with torch.autograd.graph.saved_tensors_hooks(_packer(saved), lambda tensor: tensor):
            y = layer(x)
        ends = {id(_base(t)) for t in (x, y) if isinstance(t, torch.Tensor)}
        params = tuple(dict.fromkeys(names[id(p)] for p in layer.parameters()))
        measured.append(Layer(name, params, sum(b for key, b in saved.items() if key not in ends), nbytes(x), nbytes(y),
                              id(_base(x)) in saved, id(_base(y)) in saved))
        x = y
    return tuple(measured), None



def _cast_of_parameter(tensor: torch.Tensor) -> bool:
    """Whether `tensor` is a parameter cast to another dtype (autocast's copy of a weight, cached for its region)."""
    node = tensor.grad_fn
    if node is None or type(node).__name__ != "ToCopyBackward0":
        return False
    return any(isinstance(getattr(parent, "variable", None), nn.Parameter) for parent, _ in node.next_functions if parent)


def _dtype_of(model: nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters()), torch.float32)


def _on_meta(model: nn.Module, dtype: torch.dtype | None, device: str = "meta", mode: Any = None,
             policy: bool = False) -> nn.Module:
    """A copy of `model` on the meta device (or fake CPU tensors, inside `mode`), in `dtype`: each tensor replaced
    once, so that a parameter several modules share stays one parameter (Module.to would give each module its own).
    Nothing is allocated. `policy`: as FSDP2's MixedPrecisionPolicy casts, the parameters only, a batch norm's not."""
    from dpviz.engines.workload.precision import keeps_float32

    meta = copy.deepcopy(model)  # the caller's module keeps its own tensors (a meta copy costs nothing)
    made: dict[int, torch.Tensor] = {}

    def moved(tensor: torch.Tensor, cast: bool) -> torch.Tensor:
        if id(tensor) not in made:
            kind = dtype if cast and dtype is not None and tensor.is_floating_point() else tensor.dtype
            empty = torch.empty(tensor.shape, dtype=kind, device=device)
            made[id(tensor)] = nn.Parameter(empty, tensor.requires_grad) if isinstance(tensor, nn.Parameter) else empty
        return made[id(tensor)]

    with mode or nullcontext():
        for module in meta.modules():
            for table, cast in ((module._parameters, not (policy and keeps_float32(module))), (module._buffers, not policy)):
                for name, tensor in list(table.items()):
                    if tensor is not None:
                        table[name] = moved(tensor, cast)
    return meta


def _to_meta(example: Any, dtype: torch.dtype | None, device: str = "meta") -> Any:
    if isinstance(example, torch.Tensor):
        kind = dtype if dtype is not None and example.is_floating_point() else example.dtype
        return torch.empty(example.shape, dtype=kind, device=device)
    if isinstance(example, dict):
        return {key: _to_meta(value, dtype, device) for key, value in example.items()}
    if isinstance(example, (list, tuple)):
        return type(example)(_to_meta(value, dtype, device) for value in example)
    if hasattr(example, "args"):
        return type(example)(*_to_meta(list(example.args), dtype, device),
                             **_to_meta(dict(example.kwargs), dtype, device))
    return example


def _leaves(example: Any) -> list[torch.Tensor]:
    """The example's tensors, dpviz.Args' positional and keyword ones too."""
    return tensors_in([list(example.args), dict(example.kwargs)] if hasattr(example, "args") else example)


def _rows(example: Any) -> int:
    tensor = first_tensor([list(example.args), dict(example.kwargs)]) if hasattr(example, "args") else first_tensor(example)
    return int(tensor.shape[0]) if tensor is not None and tensor.dim() else 1

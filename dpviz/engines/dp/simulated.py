"""SimulatedDataParallel: nn.DataParallel's forward on CPU threads that stand in for devices.

Same constructor and call as torch.nn.DataParallel, the same four steps (scatter, replicate,
parallel_apply, gather) as overridable methods, the same results, errors and warnings. Devices are
plain integers; every tensor stays on the CPU. Parameter copies are made by one autograd Function, as
torch's Broadcast makes them, so backward sums the replicas' gradients into the wrapped module's own
parameters (zeros for a parameter no replica used, sparse sums for sparse gradients).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from itertools import chain
from typing import Any, Sequence

import torch
from torch import nn
from torch._utils import ExceptionWrapper

from . import scatter as rules

_local = threading.local()


def current_device() -> int | None:
    """The simulated device the calling thread is running a replica on, or None outside a replica."""
    return getattr(_local, "device", None)


class _on_device:
    """Context that marks the calling thread as running on a simulated device (like torch.cuda.device)."""

    def __init__(self, device: int):
        self.device = device

    def __enter__(self) -> None:
        self.previous = current_device()
        _local.device = self.device

    def __exit__(self, *exc: object) -> None:
        _local.device = self.previous


def _broadcast_coalesced(tensors: Sequence[torch.Tensor], count: int) -> list[list[torch.Tensor]]:
    """Per-device copies of `tensors`, outside autograd, as comm.broadcast_coalesced makes them.

    Device 0 gets the tensors themselves, as comm.cpp returns them "as-is" for devices[0], so in-place
    updates made by replica 0 (BatchNorm running stats) persist and those of other replicas are lost.
    The other devices get fresh copies, each with its own version counter (comm.cpp's NOTE [ Version
    Counter in comm.*_coalesced ]).
    """
    return [list(tensors) if j == 0 else [t.detach().clone() for t in tensors] for j in range(count)]


def _reduce_add(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """The sum of one tensor's per-device copies, device 0's first, as comm.reduce_add adds them."""
    if len(tensors) == 1:
        return tensors[0]
    result = tensors[0] + tensors[1]  # a new tensor: the copies themselves stay as they are
    for other in tensors[2:]:
        result.add_(other)
    return result


def _reduce_add_coalesced(grads: Sequence[Sequence[torch.Tensor]]) -> tuple[torch.Tensor, ...]:
    """Per-tensor sums of per-device gradient lists, as comm.reduce_add_coalesced makes them.

    A tensor whose copies all hold sparse gradients gets a sparse sum; otherwise any sparse copy is
    made dense and the sum is dense (comm.py, reduce_add_coalesced). Dense sums are new tensors.
    """
    results = []
    for column in zip(*grads, strict=True):
        if all(g.is_sparse for g in column):
            results.append(_reduce_add(column))
        else:
            dense = [g.to_dense() if g.is_sparse else g for g in column]
            # torch flattens the dense ones into one buffer per device and unflattens the sum into
            # tensors of their own (.data), so even one device's sum is not the gradient itself.
            results.append(_reduce_add(dense) if len(dense) > 1 else dense[0].clone())
    return tuple(results)


class Broadcast(torch.autograd.Function):
    """_functions.Broadcast on simulated devices: one autograd node for all copies of all tensors."""

    @staticmethod
    def forward(ctx: Any, devices: Sequence[int], *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.target_gpus = list(devices)
        if not inputs:
            return ()
        ctx.num_inputs = len(inputs)
        outputs = _broadcast_coalesced(inputs, len(devices))
        # Copies of tensors that need no gradient are marked non-differentiable, as torch does.
        ctx.mark_non_differentiable(*(
            output[i] for i, needs in enumerate(ctx.needs_input_grad[1:]) if not needs for output in outputs
        ))
        return tuple(chain.from_iterable(outputs))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        # ctx.materialize_grads is left on (the default): a copy that received no gradient counts as
        # zeros, so every input gets a gradient, zeros for a parameter no replica used.
        return (None,) + ReduceAddCoalesced.apply(ctx.target_gpus, ctx.num_inputs, *grad_outputs)


class ReduceAddCoalesced(torch.autograd.Function):
    """_functions.ReduceAddCoalesced on simulated devices: sums each tensor's per-device gradients."""

    @staticmethod
    def forward(ctx: Any, devices: Sequence[int], num_inputs: int, *grads: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # torch reads the devices off the gradients (grads[i].get_device()); CPU tensors can't say.
        ctx.target_gpus = list(devices)
        return _reduce_add_coalesced([grads[i : i + num_inputs] for i in range(0, len(grads), num_inputs)])

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        return (None, None) + Broadcast.apply(ctx.target_gpus, *grad_outputs)


def _broadcast_coalesced_reshape(
    tensors: Sequence[torch.Tensor], devices: Sequence[int], detach: bool = False
) -> list[list[torch.Tensor]]:
    """Copies of `tensors` per device: plain copies if `detach`, else through Broadcast (replicate.py)."""
    if not tensors:
        return []
    if detach:
        return _broadcast_coalesced(tensors, len(devices))
    copies = Broadcast.apply(devices, *tensors)
    return [list(copies[i : i + len(tensors)]) for i in range(0, len(copies), len(tensors))]


def replicate(network: nn.Module, devices: Sequence[int], detach: bool = False) -> list[nn.Module]:
    """One shallow replica of `network` per device, wired like torch.nn.parallel.replicate."""
    if not devices:
        return []
    devices = list(devices)
    count = len(devices)
    params = list(network.parameters())
    param_index = {id(p): i for i, p in enumerate(params)}
    param_copies = _broadcast_coalesced_reshape(params, devices, detach)
    # Buffers that require grad go through Broadcast (unless detach); all others are plain copies.
    buffers = list(network.buffers())
    buffers_rg = [b for b in buffers if b.requires_grad and not detach]
    buffers_not_rg = [b for b in buffers if not (b.requires_grad and not detach)]
    buffer_copies_rg = _broadcast_coalesced_reshape(buffers_rg, devices, detach)
    buffer_copies_not_rg = _broadcast_coalesced_reshape(buffers_not_rg, devices, detach=True)
    buffer_copies = {id(b): (buffer_copies_rg, i) for i, b in enumerate(buffers_rg)}
    buffer_copies.update({id(b): (buffer_copies_not_rg, i) for i, b in enumerate(buffers_not_rg)})

    modules = list(network.modules())
    module_index = {id(m): i for i, m in enumerate(modules)}
    copies = [[m._replicate_for_data_parallel() for m in modules] for _ in range(count)]
    for i, module in enumerate(modules):
        for j in range(count):
            replica = copies[j][i]
            replica._former_parameters = OrderedDict()
            for key, child in module._modules.items():
                if child is None:
                    replica._modules[key] = None
                else:
                    setattr(replica, key, copies[j][module_index[id(child)]])
            for key, param in module._parameters.items():
                if param is None:
                    replica._parameters[key] = None
                else:
                    copy = param_copies[j][param_index[id(param)]]
                    # A non-leaf tensor, not a Parameter, as in torch; with detach, device 0's copy is
                    # the Parameter itself, since broadcast_coalesced returns it as-is.
                    setattr(replica, key, copy)
                    replica._former_parameters[key] = copy
            for key, buf in module._buffers.items():
                if buf is None:
                    replica._buffers[key] = None
                else:
                    table, index = buffer_copies[id(buf)]
                    setattr(replica, key, table[j][index])
    return [copies[j][0] for j in range(count)]


def parallel_apply(
    modules: Sequence[nn.Module],
    inputs: Sequence[Any],
    kwargs_tup: Sequence[dict[str, Any]] | None = None,
    devices: Sequence[int | torch.device | None] | None = None,
) -> list[Any]:
    """Run each replica on its own thread, as torch.nn.parallel.parallel_apply does, and re-raise
    the first failure by replica index."""
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs {len(inputs)}")
    if kwargs_tup is not None:
        if len(modules) != len(kwargs_tup):
            raise AssertionError(
                f"The number of modules {len(modules)} is not equal to the number of kwargs_tup {len(kwargs_tup)}"
            )
    else:
        kwargs_tup = ({},) * len(modules)
    if devices is None:
        devices = [None] * len(modules)
    elif len(modules) != len(devices):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of devices {len(devices)}")
    # Resolved here, in the calling thread, as torch's parallel_apply does with
    # _get_device_index(x, True): a device left as None is the caller's current device for every replica.
    devices = [_resolve_device(d) for d in devices]
    grad_enabled = torch.is_grad_enabled()
    autocast_enabled = torch.is_autocast_enabled("cpu")
    results: dict[int, Any] = {}
    lock = threading.Lock()

    def worker(i: int, module: nn.Module, input: Any, kwargs: dict[str, Any], device: int) -> None:
        torch.set_grad_enabled(grad_enabled)  # grad mode is thread-local: carry the caller's over
        try:
            with _on_device(device), torch.autocast("cpu", enabled=autocast_enabled):
                if not isinstance(input, (list, tuple)):
                    input = (input,)
                output = module(*input, **kwargs)
            with lock:
                results[i] = output
        except Exception:
            with lock:
                results[i] = ExceptionWrapper(where=f"in replica {i} on device {device}")

    jobs = list(zip(range(len(modules)), modules, inputs, kwargs_tup, devices))
    if len(jobs) > 1:
        threads = [threading.Thread(target=worker, args=job) for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:
        worker(*jobs[0])

    outputs = []
    for i in range(len(inputs)):
        output = results[i]
        if isinstance(output, ExceptionWrapper):
            output.reraise()
        outputs.append(output)
    return outputs


class SimulatedDataParallel(nn.Module):
    """A drop-in for nn.DataParallel whose devices are CPU threads named 0, 1, 2, ..."""

    simulated = True

    def __init__(
        self,
        module: nn.Module,
        device_ids: Sequence[int] | None = None,
        output_device: int | None = None,
        dim: int = 0,
    ) -> None:
        super().__init__()
        if device_ids is None:
            device_ids = [0, 1]  # what "all devices" means for a two-device simulated machine
        device_ids = [_device_index(d) for d in device_ids]
        if not device_ids:
            raise RuntimeError("no available devices were found")
        self.dim = dim
        self.module = module
        self.device_ids = device_ids
        self.output_device = device_ids[0] if output_device is None else _device_index(output_device)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        with torch.autograd.profiler.record_function("DataParallel.forward"):
            inputs, module_kwargs = self.scatter(inputs, kwargs, self.device_ids)
            if not inputs and not module_kwargs:
                inputs, module_kwargs = ((),), ({},)
            if len(self.device_ids) == 1:
                with _on_device(self.device_ids[0]):
                    return self.module(*inputs[0], **module_kwargs[0])
            replicas = self.replicate(self.module, self.device_ids[: len(inputs)])
            outputs = self.parallel_apply(replicas, inputs, module_kwargs)
            return self.gather(outputs, self.output_device)

    def replicate(self, module: nn.Module, device_ids: Sequence[int]) -> list[nn.Module]:
        return replicate(module, device_ids, not torch.is_grad_enabled())

    def scatter(self, inputs: tuple[Any, ...], kwargs: dict[str, Any] | None, device_ids: Sequence[int]) -> Any:
        return rules.scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def parallel_apply(self, replicas: Sequence[nn.Module], inputs: Sequence[Any], kwargs: Any) -> list[Any]:
        return parallel_apply(replicas, inputs, kwargs, self.device_ids[: len(replicas)])

    def gather(self, outputs: Any, output_device: int) -> Any:
        return rules.gather(outputs, dim=self.dim)


def _resolve_device(device: Any) -> int:
    """A device given as None is the calling thread's current simulated device (0 outside a replica),
    as torch's _get_device_index(None, optional=True) is the current CUDA device (0 unless set)."""
    if device is None:
        current = current_device()
        return 0 if current is None else current
    return _device_index(device)


def _device_index(device: Any) -> int:
    if isinstance(device, torch.device):
        device = device.index
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"simulated devices are named by integers >= 0, got {device!r}")
    return device

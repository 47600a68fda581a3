"""SimulatedDataParallel: nn.DataParallel's forward on CPU threads that stand in for devices.

Same constructor and call as torch.nn.DataParallel, the same four steps (scatter, replicate,
parallel_apply, gather) as overridable methods, the same results, errors and warnings. Devices are
plain integers; every tensor stays on the CPU. Parameter copies stay in autograd, so backward sums the
replicas' gradients into the wrapped module's own parameters, as Broadcast.backward does.
"""
from __future__ import annotations

import threading
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


def _copies(tensors: list[torch.Tensor], count: int, detach: bool) -> list[list[torch.Tensor]]:
    """Per-device copies of `tensors`, as comm.broadcast_coalesced (detach) or Broadcast.apply makes them.

    Device 0's copy shares storage with the original, as on real GPUs, so in-place updates made by
    replica 0 (BatchNorm running stats) persist and those of other replicas are lost.
    """
    if detach:
        return [[t.detach() if j == 0 else t.detach().clone() for t in tensors] for j in range(count)]
    # view_as is a differentiable alias and clone a differentiable copy: gradients flow back to t.
    return [[t.view_as(t) if j == 0 else t.clone() for t in tensors] for j in range(count)]


def replicate(network: nn.Module, devices: Sequence[int], detach: bool = False) -> list[nn.Module]:
    """One shallow replica of `network` per device, wired like torch.nn.parallel.replicate."""
    if not devices:
        return []
    count = len(devices)
    params = list(network.parameters())
    param_copies = _copies(params, count, detach)
    param_index = {id(p): i for i, p in enumerate(params)}
    buffers = list(network.buffers())
    buffer_copies = [
        _copies([b], count, detach or not b.requires_grad) for b in buffers
    ]
    buffer_index = {id(b): i for i, b in enumerate(buffers)}

    modules = list(network.modules())
    module_index = {id(m): i for i, m in enumerate(modules)}
    copies = [[m._replicate_for_data_parallel() for m in modules] for _ in range(count)]
    for i, module in enumerate(modules):
        for j in range(count):
            replica = copies[j][i]
            replica._former_parameters = {}
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
                    setattr(replica, key, copy)  # a non-leaf tensor, not a Parameter, as in torch
                    replica._former_parameters[key] = copy
            for key, buf in module._buffers.items():
                if buf is None:
                    replica._buffers[key] = None
                else:
                    setattr(replica, key, buffer_copies[buffer_index[id(buf)]][j][0])
    return [copies[j][0] for j in range(count)]


def parallel_apply(
    modules: Sequence[nn.Module],
    inputs: Sequence[Any],
    kwargs_tup: Sequence[dict[str, Any]] | None = None,
    devices: Sequence[int] | None = None,
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
        devices = list(range(len(modules)))
    elif len(modules) != len(devices):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of devices {len(devices)}")
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


def _device_index(device: Any) -> int:
    if isinstance(device, torch.device):
        device = device.index
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"simulated devices are named by integers >= 0, got {device!r}")
    return device

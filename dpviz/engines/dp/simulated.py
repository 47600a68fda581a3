"""SimulatedDataParallel: nn.DataParallel's forward on CPU threads that stand in for devices.

Same constructor and call as torch.nn.DataParallel, the same four steps (scatter, replicate,
parallel_apply, gather) as overridable methods, the same results, errors and warnings. Devices are
plain integers; every tensor stays on the CPU. Parameter copies are made by one autograd Function, as
torch's Broadcast makes them, so backward sums the replicas' gradients into the wrapped module's own
parameters (zeros for a parameter no replica used, sparse sums for sparse gradients).

Three things are done differently from torch, for speed, with the same outcome: replicas run on threads
borrowed from a pool (dpviz.engines.dp.workers) rather than started and joined per call, and on at most
one thread per CPU core, replicas beyond that taking turns on them (what a CPU core would make them do on
the interpreter lock anyway); and replicate writes a plain module's replica dicts directly rather than
through nn.Module.__setattr__.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from functools import partial
from itertools import chain
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch._utils import ExceptionWrapper

from dpviz.engines.dp import scatter as rules
from dpviz.engines.dp.workers import POOL

_local = threading.local()


def current_device() -> int | None:
    """The simulated device the calling thread is running a replica on, or None outside a replica."""
    return getattr(_local, "device", None)


class _autocast_off:
    """torch.autocast("cpu", enabled=False), entered in a replica's thread as parallel_apply enters it,
    without the constructor's checks for an enabled autocast (a tenth of a small replica's cost).

    The same calls as autocast's __enter__ and __exit__ for enabled=False: the dtype and the cache flag
    it sets are the thread's own (what the constructor reads), so entering only disables autocast and
    counts the nesting; leaving restores all three, and clears the cast cache at the outermost level.
    tests/test_simulated.py compares what a replica sees inside with torch.autocast's.
    """

    def __enter__(self) -> None:
        self.cache, self.enabled = torch.is_autocast_cache_enabled(), torch.is_autocast_enabled("cpu")
        self.dtype = torch.get_autocast_dtype("cpu")
        torch.set_autocast_enabled("cpu", False)
        torch.autocast_increment_nesting()

    def __exit__(self, *exc: object) -> None:
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        torch.set_autocast_enabled("cpu", self.enabled)
        torch.set_autocast_dtype("cpu", self.dtype)
        torch.set_autocast_cache_enabled(self.cache)


def _autocast(enabled: bool) -> Any:
    """The autocast context parallel_apply enters in each replica's thread."""
    # A torch function mode (torch.export's) is told of autocast by torch's own context: take that path then.
    if enabled or torch._C._is_torch_function_mode_enabled():
        return torch.autocast("cpu", enabled=enabled)
    return _autocast_off()


class _on_device:
    """Context that marks the calling thread as running on a simulated device (like torch.cuda.device)."""

    def __init__(self, device: int):
        self.device = device

    def __enter__(self) -> None:
        self.previous = current_device()
        _local.device = self.device

    def __exit__(self, *exc: object) -> None:
        _local.device = self.previous


_PLAIN_TENSORS = (torch.Tensor, nn.Parameter)  # a subclass's ops may do more than make copies: it keeps clone()


def _broadcast_coalesced(tensors: Sequence[torch.Tensor], count: int) -> list[list[torch.Tensor]]:
    """Per-device copies of `tensors`, outside autograd, as comm.broadcast_coalesced makes them.

    Device 0 gets the tensors themselves, as comm.cpp returns them "as-is" for devices[0], so in-place
    updates made by replica 0 (BatchNorm running stats) persist and those of other replicas are lost.
    The other devices get fresh copies, each with its own version counter (comm.cpp's NOTE [ Version
    Counter in comm.*_coalesced ]).
    """
    if count > 1 and tensors and all(type(t) in _PLAIN_TENSORS and t.is_contiguous() for t in tensors):
        # All of a tensor's copies in one call: unbind_copy makes each a tensor of its own, contiguous as torch's
        # (comm.cpp unflattens them from one contiguous buffer per device), which a clone of a contiguous tensor is.
        copies = [torch.unbind_copy(t.detach().expand(count - 1, *t.shape)) for t in tensors]
        return [list(tensors), *map(list, zip(*copies))]
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
    hooked = bool(_registration_hooks())
    plain = [not hooked and _plain(m) for m in modules]
    copies = [[_plain_shell(m) if p else m._replicate_for_data_parallel() for m, p in zip(modules, plain)]
              for _ in range(count)]
    # What a plain module's replicas get is worked out once per module, then written into each replica.
    plans = [_plain_plan(m, module_index, param_index, buffer_copies) if p else None for m, p in zip(modules, plain)]
    for i, module in enumerate(modules):
        for j in range(count):
            replica = copies[j][i]
            if plain[i]:
                _wire_plain(replica, plans[i], copies[j], param_copies[j] if param_copies else (), j)
                continue
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


# Replicating is most of a small model's DataParallel call, and most of that is nn.Module.__setattr__
# choosing, for every attribute of every replica, which dict the value goes to. For a module that
# keeps nn.Module's own attribute machinery, those choices are known in advance, so replicate writes
# the dicts directly; the replicas come out exactly as torch's setattr calls leave them
# (tests/test_simulated_replicate.py compares them). Anything that could make setattr do more (an override,
# a registration hook, a name also used elsewhere) takes torch's own path.
_MODULE_METHODS = ("__setattr__", "_replicate_for_data_parallel", "register_buffer", "register_parameter")


def _registration_hooks() -> list:
    from torch.nn.modules import module as torch_module

    return [*torch_module._global_module_registration_hooks, *torch_module._global_parameter_registration_hooks,
            *torch_module._global_buffer_registration_hooks]


def _plain(module: nn.Module) -> bool:
    """Whether every setattr replicate makes on `module`'s replicas only writes one dict entry."""
    cls = type(module)
    if any(getattr(cls, name) is not getattr(nn.Module, name) for name in _MODULE_METHODS):
        return False
    state, buffers, children = module.__dict__, module._buffers, module._modules
    if any(isinstance(b, torch.nn.Buffer) for b in buffers.values() if b is not None):
        return False  # setattr reads a Buffer's own persistence flag
    non_persistent = module._non_persistent_buffers_set
    names = [*children, *module._parameters, *buffers]
    # A name that is also an instance or class attribute (a property, say), or in two dicts at once,
    # is one setattr treats specially.
    return (len(set(names)) == len(names) and not any(name in state or hasattr(cls, name) for name in names)
            and not any(name in non_persistent for name in children))


def _plain_plan(module: nn.Module, module_index: dict[int, int], param_index: dict[int, int],
                buffer_copies: dict) -> tuple[list, list, list]:
    """Where each child, parameter and buffer of a plain module's replicas comes from: an index into
    the replica's modules, the device's parameter copies, or a buffer table (None for None)."""
    return ([(key, None if child is None else module_index[id(child)]) for key, child in module._modules.items()],
            [(key, None if p is None else param_index[id(p)]) for key, p in module._parameters.items()],
            [(key, None if b is None else buffer_copies[id(b)]) for key, b in module._buffers.items()])


def _wire_plain(replica: nn.Module, plan: tuple[list, list, list], copies: list[nn.Module],
                param_copies: Sequence[torch.Tensor], j: int) -> None:
    """replicate's setattr calls for one replica of a plain module, as the dict writes they end in."""
    children, params, buffers = plan
    state = replica.__dict__
    modules, parameters, former, own_buffers = (state["_modules"], state["_parameters"], state["_former_parameters"],
                                                state["_buffers"])
    for key, index in children:
        modules[key] = None if index is None else copies[index]
    for key, index in params:
        if index is None:
            parameters[key] = None
            continue
        copy = param_copies[index]
        # Device 0's copy under detach is the Parameter itself, which setattr registers as a parameter;
        # any other copy is a plain non-leaf tensor, which setattr makes a plain attribute.
        if type(copy) is not torch.Tensor and isinstance(copy, nn.Parameter):
            setattr(replica, key, copy)
        else:
            state[key] = copy
        former[key] = copy
    for key, source in buffers:
        if source is None:
            own_buffers[key] = None
        else:
            table, index = source
            own_buffers[key] = table[j][index]


def _plain_shell(module: nn.Module) -> nn.Module:
    """module._replicate_for_data_parallel() plus replicate's `_former_parameters`, for a plain module."""
    state = module.__dict__.copy()
    state["_parameters"] = {}
    state["_buffers"] = state["_buffers"].copy()
    state["_modules"] = state["_modules"].copy()
    state["_is_replica"] = True
    state["_former_parameters"] = OrderedDict()
    replica = module.__new__(type(module))
    object.__setattr__(replica, "__dict__", state)  # what Module.__setattr__ does for "__dict__"
    return replica


def parallel_apply(
    modules: Sequence[nn.Module],
    inputs: Sequence[Any],
    kwargs_tup: Sequence[dict[str, Any]] | None = None,
    devices: Sequence[int | torch.device | None] | None = None,
    *,
    watch: Callable[..., Any] | None = None,
) -> list[Any]:
    """Run the replicas on threads other than the caller's, as torch.nn.parallel.parallel_apply does (at most
    one per core: dpviz.engines.dp.workers), and re-raise the first failure by replica index. `watch`, if given, makes each replica's call itself, in the
    replica's thread: `watch(replica, device, module, args, kwargs)` returns `module(*args, **kwargs)`
    (dpviz's recorder times replicas so, where forward hooks would send every call down nn.Module's
    slower path)."""
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
    devices = [d if type(d) is int and d >= 0 else _resolve_device(d) for d in devices]
    grad_enabled = torch.is_grad_enabled()
    autocast_enabled = torch.is_autocast_enabled("cpu")
    results: dict[int, Any] = {}
    lock = threading.Lock()

    def worker(i: int, module: nn.Module, input: Any, kwargs: dict[str, Any], device: int) -> None:
        torch._C._set_grad_enabled(grad_enabled)  # grad mode is thread-local: carry the caller's over
        try:
            # _on_device(device)'s work, written out: it is one of the few things a small replica's call does
            previous, _local.device = getattr(_local, "device", None), device
            try:
                with _autocast(autocast_enabled):
                    if not isinstance(input, (list, tuple)):
                        input = (input,)
                    output = module(*input, **kwargs) if watch is None else watch(i, device, module, input, kwargs)
            finally:
                _local.device = previous
            with lock:
                results[i] = output
        except Exception:
            with lock:
                results[i] = ExceptionWrapper(where=f"in replica {i} on device {device}")

    jobs = list(zip(range(len(modules)), modules, inputs, kwargs_tup, devices))
    if len(jobs) > 1:
        # Threads of their own, as torch starts; borrowed from a pool rather than started per call, one per core
        # at most (dpviz.engines.dp.workers says what that keeps and what it does not).
        POOL.run_each([partial(worker, *job) for job in jobs])
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
    replica_watch: Callable[..., Any] | None = None  # parallel_apply's `watch`, for whoever records the run

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
        return parallel_apply(replicas, inputs, kwargs, self.device_ids[: len(replicas)], watch=self.replica_watch)

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

"""The model cut over the ranks with torch's own tensor parallelism, and the observer that times what it does.

    model, observer, seconds = wrap(model, config, rank, cuda, local_rank, memory_steps)   # the rank program's `wrap`
    torch_plan({"net.0": "colwise", "net.2": "rowwise"})   # the declared plan as torch's ParallelStyles

The plan is the model's declaration (dpviz.catalogue.ModelSpec.tensor, or a module's own tp_plan, read through
dpviz.engines.workload.declared), applied with torch.distributed.tensor.parallel.parallelize_module on a
one-dimensional DeviceMesh named "tp" (gloo on the CPU, NCCL on GPUs). Every cut Linear's weight becomes a DTensor:
a column-wise Linear keeps rows k/W.. of its weight (output features), a row-wise one columns k/W.. (input features).

The observer is torch's own CommDebugMode (torch.distributed.tensor.debug), which sees every collective DTensor
runs and the module and pass it runs in; it also writes down, for each all-reduce, when it was issued and when its
wait returned, and the bytes of the tensor it was handed. What DTensor does is unchanged.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch.utils._pytree import tree_flatten
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.debug import CommDebugMode
from torch.distributed.tensor.debug._comm_mode import _CommModeModuleTracker
from torch.distributed.tensor.parallel import ColwiseParallel, PrepareModuleInput, RowwiseParallel, parallelize_module

from dpviz.catalogue import OWN
from dpviz.engines.ddp.observer import RankObserver
from dpviz.engines.workload import declared
from dpviz.engines.workload.memory import nbytes, stored_bytes
from dpviz.engines.ranks.program import local
from dpviz.splitting import matches

MESH = ("tp",)  # the mesh's one dimension: the tensor-parallel group is every rank
STYLES = {
    "colwise": ColwiseParallel,
    "rowwise": RowwiseParallel,
    # The input the module's column-wise Linears share, made one replicated DTensor: its gradient is summed once.
    "shared_input": lambda: PrepareModuleInput(input_layouts=Replicate(), desired_input_layouts=Replicate()),
}
ALL_REDUCE = "all_reduce"  # the collective DTensor runs for Partial -> Replicate (torch's c10d functional op)
WRAPPED = "_wrap_tensor_autograd"  # an all-reduce's output handed to autograd, not yet waited for


def torch_plan(plan: dict[str, str]) -> dict[str, Any]:
    """The declared plan as parallelize_module takes it: each style torch's own; "whole" left out (nothing to do)."""
    return {path: STYLES[style]() for path, style in plan.items() if style != "whole"}


def cut_modules(model: nn.Module, plan: dict[str, str]) -> list[dict]:
    """Every module the plan names, in the model's order: its index (a span's group), path and style."""
    found = []
    for path, _ in model.named_modules():
        style = next((s for pattern, s in plan.items() if path and matches(pattern, path)), None)
        if style is not None:
            found.append({"index": len(found), "name": path, "style": style})
    return found


def wrap(model: nn.Module, config: Any, rank: int, cuda: bool, local_rank: int,
         memory_steps: set[int]) -> tuple[Any, "TensorObserver", float]:
    """parallelize_module on a mesh of every rank; the model's timed forward, its observer, the seconds it took."""
    begin = time.perf_counter()
    plan = declared.tensor_plan(model, None if config.model == OWN else config.model)
    world = torch.distributed.get_world_size()
    mesh = init_device_mesh("cuda" if cuda else "cpu", (world,), mesh_dim_names=MESH)
    parallelize_module(model, mesh, torch_plan(plan))
    cut = time.perf_counter()
    observer = TensorObserver(rank, model, cut_modules(model, plan), cuda, memory_steps,
                              "NCCL" if cuda else "gloo", config.dim)
    observer.add("parallelize", begin, cut)
    observer.snapshot("parallelize")
    return observer.timed_model(), observer, cut - begin


class TensorObserver(RankObserver):
    """Spans, the bytes handed to each all-reduce and a memory ledger of one rank; CommDebugMode while a step runs."""

    def __init__(self, rank: int, model: nn.Module, modules: list[dict], cuda: bool, memory_steps: set[int],
                 thread_name: str, dim: int = 0):
        # Not RankObserver.__init__: there is no DDP object to time, no buckets.
        self._keep_records(rank, None, cuda, memory_steps, thread_name, dim)
        self.model = model
        self.modules = modules
        self.index = {m["name"]: m["index"] for m in modules}
        # Each rank's slices and the whole parts: what this process allocated.
        self.held = {"parameters": stored_bytes([local(p) for p in model.parameters()]) + nbytes(list(model.buffers()))}
        self.root = type(model).__name__  # CommDebugMode names modules under the root's class name
        self.mode = _Recording(self)
        self.watch_activations(model)

    def recording(self) -> "_Recording":
        """CommDebugMode with this observer's timing, for one step's forward, backward and optimizer step."""
        self.mode = _Recording(self)
        return self.mode

    def module_of(self, name: str) -> int:
        """A span's group: the index of the module CommDebugMode names (a module the plan does not name is added)."""
        path = name.split(".", 1)[1] if "." in name else ""
        if path not in self.index:
            self.index[path] = len(self.modules)
            self.modules.append({"index": self.index[path], "name": path, "style": "whole"})
        return self.index[path]

    def timed_model(self):
        """The whole forward on the rank's rows, timed as DDP's module forward is."""
        return self._timed_forward(self.model)

    def facts(self) -> dict:
        """The cut modules by index (a span's group), path and style; and CommDebugMode's own count of this rank's
        collectives per module and pass in its last step."""
        return {"cut_modules": self.modules, "comm_counts": self.mode.counted()}


class _Recording(CommDebugMode):
    """torch's CommDebugMode, which also times each all-reduce (from its issue to its wait) and writes down its bytes."""

    def __init__(self, observer: TensorObserver):
        super().__init__()
        self.advanced_module_tracker = _Tracker(observer.model)
        self.observer = observer
        self.pending: dict[int, tuple[torch.Tensor, float, str, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = getattr(getattr(func, "_overloadpacket", None), "__name__", "")
        start = time.perf_counter()
        # An all-reduce's output is waited for by the op that first uses it (a wait_tensor, or an op on the
        # AsyncCollectiveTensor DTensor hands back, which waits inside): that op's end is when its sum was there.
        waited = [key for key in map(id, tree_flatten((args, kwargs))[0]) if key in self.pending]
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if out is NotImplemented:
            return out
        observer = self.observer
        if name == ALL_REDUCE:
            backward = self.advanced_module_tracker.is_bw
            phase = "allreduce_backward" if backward else "allreduce_forward"
            group = observer.module_of(self.advanced_module_tracker.name)
            observer.passed("all-reduce (backward)" if backward else "all-reduce (forward)", nbytes(args[0]))
            self.pending[id(out)] = (out, start, phase, group)
        elif name == WRAPPED and waited:  # the same all-reduce's output, wrapped for autograd: either may be waited on
            self.pending[id(out)] = (out, *self.pending[waited[0]][1:])
        else:
            for key in waited:
                if key not in self.pending:
                    continue  # its other name was waited on in this op too
                kept, begun, phase, group = self.pending[key]
                for other in [k for k, v in self.pending.items() if v[1:] == (begun, phase, group)]:
                    del self.pending[other]
                observer.add(phase, begun, time.perf_counter(), thread=observer.thread_name, group=group)
        return out

    def counted(self) -> list[list]:
        """[module path, pass, collective, count] for every collective CommDebugMode counted: torch's own tally."""
        rows = []
        for name, passes in self.comm_module_counts.items():
            if name == "Global" or "." not in name:
                continue  # the totals, and the root's (its children's summed)
            for key in ("forward", "backward"):
                for op, count in passes.get(key, {}).items():
                    rows.append([name.split(".", 1)[1], key, getattr(op, "__name__", str(op)), count])
        return sorted(rows)


class _Tracker(_CommModeModuleTracker):
    """CommDebugMode's module tracker, following the run's model only. A training step also runs the teacher its
    targets come from, a model of the same class whose modules go by the same names; the tracker keeps one hook
    handle per name, so the teacher's would leave the model's hooks behind, and the next step's tracker would pop
    modules it never pushed."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.watched = {id(m) for m in model.modules()}

    def _fw_pre_hook(self, mod, input):
        if id(mod) in self.watched:
            super()._fw_pre_hook(mod, input)

    def _fw_post_hook(self, mod, input, output):
        if id(mod) in self.watched:
            super()._fw_post_hook(mod, input, output)

    def _bw_hook(self, mod, output):
        if id(mod) in self.watched:
            super()._bw_hook(mod, output)

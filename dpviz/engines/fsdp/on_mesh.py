"""FSDP over tensor parallelism on one rank, as torchtitan composes them: the model cut with the tp engine's own plan
inside the rank's tensor-parallel group, then sharded by fully_shard over its dp_shard group (wrapping.py), and the
observer that also times the tensor-parallel all-reduces and notes the ranks of every collective.

    wrap(model, config, rank, cuda, local_rank, memory_steps)   # the rank program's `wrap` on a mesh

torch.distributed.tensor.parallel's ColwiseParallel and RowwiseParallel turn each cut Linear's weight into a DTensor
on mesh["tp"]; fully_shard then shards dim 0 of that slice again over mesh["dp_shard"] (placements
(_StridedShard(0) or Shard(0), Shard(d))), so each rank holds 1/(dp_shard · T) of a cut weight and 1/dp_shard of
what stays whole.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor.parallel import parallelize_module

from dpviz.catalogue import OWN
from dpviz.engines.fsdp.mesh import DIMS, DP_SHARD, TP, degrees
from dpviz.engines.fsdp.wrapping import ShardObserver, wrap as wrap_fsdp
from dpviz.engines.tp.parallel import _Recording, torch_plan
from dpviz.engines.workload import declared


def wrap(model: nn.Module, config: Any, rank: int, cuda: bool, local_rank: int,
         memory_steps: set[int]) -> tuple[nn.Module, "MeshObserver", float]:
    """FSDP's wrap (wrapping.py) on the mesh: the model cut first, then sharded over its dp_shard dimension."""
    return wrap_fsdp(model, config, rank, cuda, local_rank, memory_steps,
                     prepare=lambda whole: cut(whole, config, cuda), observing=MeshObserver)


def cut(model: nn.Module, config: Any, cuda: bool) -> DeviceMesh:
    """`model` cut in place inside each tensor-parallel group of the (dp_shard, tp) mesh of every rank, with the
    model's declared plan (the same the tp engine applies); the mesh's dp_shard dimension, for fully_shard."""
    plan = declared.tensor_plan(model, None if config.model == OWN else config.model)
    mesh = init_device_mesh("cuda" if cuda else "cpu", degrees(dist.get_world_size(), config.tp), mesh_dim_names=DIMS)
    parallelize_module(model, mesh[TP], torch_plan(plan))
    return mesh[DP_SHARD]


class MeshObserver(ShardObserver):
    """A rank of FSDP × TP: FSDP2's steps timed as ShardObserver times them; each step's tensor-parallel all-reduces
    timed by the tp engine's CommDebugMode, drawn on the sub-row of the sharded module that holds the cut Linear."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.order = sorted(((m["name"], m["index"]) for m in self.modules), key=lambda m: -len(m[0]))
        self.mode = _GroupsRecording(self)

    def recording(self) -> "_GroupsRecording":
        """CommDebugMode for one step's forward, backward and optimizer step (its counts are the last step's)."""
        self.mode = _GroupsRecording(self)
        return self.mode

    def module_of(self, name: str) -> int:
        """A span's group: the sharded module that holds the module CommDebugMode names ("Sequential.net.2")."""
        path = name.split(".", 1)[1] if "." in name else ""
        return next(index for unit, index in self.order if unit == "" or path == unit or path.startswith(unit + "."))

    def facts(self) -> dict:
        """FSDP's sharded modules; CommDebugMode's tally of the last step (module by module, and the whole step as module
        ""), and its collectives by group; and each
        parameter as DTensor places it on this rank: [name, its placements (one per mesh dimension, as torch writes
        them: "_StridedShard(dim=0, sf=2)"), local shape, whole shape]."""
        shares = [[name, [repr(each) for each in p.placements], list(p.to_local().shape), list(p.shape)]
                  for name, p in self.model.named_parameters()]
        return {**super().facts(), "comm_counts": self.mode.counted() + self.mode.totals(), "comm_groups": self.mode.grouped(),
                "shares": shares}


class _GroupsRecording(_Recording):
    """The tp engine's CommDebugMode, which also notes the ranks of the process group each collective runs in."""

    def __init__(self, observer: MeshObserver):
        super().__init__(observer)
        self.groups: dict[tuple[str, tuple[int, ...]], int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        ranks = _group_ranks(func, args)
        if ranks is not None:
            name = getattr(getattr(func, "_overloadpacket", None), "__name__", str(func))
            key = (name, ranks)
            self.groups[key] = self.groups.get(key, 0) + 1
        return super().__torch_dispatch__(func, types, args, kwargs)

    def totals(self) -> list[list]:
        """CommDebugMode's count of the whole step, per pass and collective, as rows of module "" (the tp engine's rows
        name modules only: a collective the root itself runs, FSDP's of the parameters no child holds, is in none)."""
        passes = self.comm_module_counts.get("Global", {})
        return sorted(["", key, getattr(op, "__name__", str(op)), count] for key in ("forward", "backward")
                      for op, count in passes.get(key, {}).items())

    def grouped(self) -> list[list]:
        """[collective, the ranks of its group, count] for every collective the step ran."""
        return [[name, list(ranks), count] for (name, ranks), count in sorted(self.groups.items())]


def _group_ranks(func: Any, args: tuple) -> tuple[int, ...] | None:
    """The ranks of the process group a collective op is handed: c10d's ops take the group itself (a ScriptObject),
    the functional ones (DTensor's all-reduce) its registered name, last of their arguments; None for an op that
    runs in no group."""
    namespace = getattr(func, "namespace", "")
    if namespace == "c10d":
        for arg in args:
            if isinstance(arg, torch.ScriptObject):
                try:
                    return tuple(dist.get_process_group_ranks(dist.ProcessGroup.unbox(arg)))
                except (RuntimeError, ValueError):
                    continue  # a ReduceOp, not the group
    elif namespace == "_c10d_functional" and args and isinstance(args[-1], str):
        try:
            return tuple(dist.get_process_group_ranks(dist.distributed_c10d._resolve_process_group(args[-1])))
        except (RuntimeError, ValueError):
            return None
    return None

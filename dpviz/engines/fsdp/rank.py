"""FSDP's rank program: DDP's loader, schedule and step, with the model sharded by fully_shard instead of
wrapped in DistributedDataParallel (wrapping.py). A mixed-precision run's step enters no autocast: FSDP2's
MixedPrecisionPolicy casts what each module gathers and computes with.

On a mesh (a tensor-parallel degree T > 1, mesh.py) the ranks of one tensor-parallel group are one data-parallel rank:
they load the same rows (DDP's sampler over the ranks / T dp_shard indices), cut every layer between them, and each
step runs inside the tp engine's CommDebugMode, which times the all-reduces and notes each collective's group."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from dpviz.config import RunConfig
from dpviz.engines.ddp.rank import PROGRAM as DDP, loader as ddp_loader, schedule as ddp_schedule, step as ddp_step
from dpviz.engines.fsdp.merge import to_trace
from dpviz.engines.fsdp.mesh import coordinates, degrees
from dpviz.engines.fsdp import on_mesh, wrapping
from dpviz.engines.ranks.program import Step


def loader(config: RunConfig, plain: Any, rank: int, world: int) -> tuple[Any, Any]:
    """DDP's loader, over the dp_shard indices: a tensor-parallel group's ranks read the same rows."""
    return ddp_loader(config, plain, coordinates(rank, config.tp)[0], degrees(world, config.tp)[0])


def schedule(config: RunConfig, world: int, rank: int):
    """DDP's steps of this rank's dp_shard index."""
    return ddp_schedule(config, degrees(world, config.tp)[0], coordinates(rank, config.tp)[0])


def wrap(model: Any, config: RunConfig, *args: Any) -> tuple[Any, Any, float]:
    """fully_shard over every rank (wrapping.py), or on the mesh after the tensor-parallel cut (on_mesh.py)."""
    return (wrapping if config.tp == 1 else on_mesh).wrap(model, config, *args)


def step(s: Step) -> None:
    """DDP's step without autocast; on a mesh, inside the observer's CommDebugMode."""
    if s.config.tp == 1:
        ddp_step(s, cast=False)
        return
    with s.observer.recording(), warnings.catch_warnings():
        # Both are torch's remarks on what FSDP × TP does by design, not faults of the run: the root module hands back
        # a view of DTensor's output, and CommDebugMode's module tracker hooks the backward of modules whose inputs
        # (the data) need no gradient.
        warnings.filterwarnings("ignore", message="FSDP2-wrapped module")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        ddp_step(s, cast=False)


PROGRAM = dataclasses.replace(DDP, loader=loader, schedule=schedule, wrap=wrap, step=step, merge=to_trace)

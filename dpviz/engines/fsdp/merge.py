"""Every FSDP rank's report made one trace, as DDP's are (dpviz.engines.ddp.merge); on a mesh, each lane named by its
rank's coordinates, and a step's batch the rows of each tensor-parallel group once (its ranks load the same rows)."""
from __future__ import annotations

from typing import Any

from dpviz.config import RunConfig
from dpviz.engines.ddp.merge import to_trace as ddp_trace
from dpviz.engines.fsdp.mesh import rank_words
from dpviz.trace import Trace


def to_trace(config: RunConfig, launched: dict[str, Any], *, backend: str, torch_version: str, machine_gpus: int,
             lane_names: list[str] | None = None) -> Trace:
    if config.tp == 1:
        return ddp_trace(config, launched, backend=backend, torch_version=torch_version, machine_gpus=machine_gpus,
                         lane_names=lane_names)
    where = lambda rank: f"cuda:{rank}" if backend == "cuda" else "the CPU"
    names = lane_names or [f"rank {rank}: {rank_words(rank, config.tp)} (process on {where(rank)})"
                           for rank in range(len(launched["ranks"]))]
    return ddp_trace(config, launched, backend=backend, torch_version=torch_version, machine_gpus=machine_gpus,
                     lane_names=names, together=config.tp)

"""ZeRO-1's rank program: DDP's, with ZeroRedundancyOptimizer as the optimizer each rank steps (sharded.py)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from dpviz.config import RunConfig
from dpviz.engines.ddp.rank import PROGRAM as DDP
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.zero1.sharded import sharded


def optimizer(config: RunConfig, trainable: list, passed: Callable[..., None]) -> tuple[Any, Any]:
    """ZeroRedundancyOptimizer over every parameter, each rank stepping its own shard (and holding its state)."""
    kind, settings = tutorial.optimizer_of(config)
    return sharded(trainable, kind, settings, passed)


PROGRAM = dataclasses.replace(DDP, optimizer=optimizer)

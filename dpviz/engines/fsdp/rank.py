"""FSDP's rank program: DDP's loader, schedule and step, with the model sharded by fully_shard instead of
wrapped in DistributedDataParallel (sharding.py)."""
from __future__ import annotations

import dataclasses

from dpviz.engines.ddp.rank import PROGRAM as DDP
from dpviz.engines.fsdp.sharding import wrap

PROGRAM = dataclasses.replace(DDP, wrap=wrap)

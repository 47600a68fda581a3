"""FSDP's rank program: DDP's loader, schedule and step, with the model sharded by fully_shard instead of
wrapped in DistributedDataParallel (wrapping.py). A mixed-precision run's step enters no autocast: FSDP2's
MixedPrecisionPolicy casts what each module gathers and computes with."""
from __future__ import annotations

import dataclasses
from functools import partial

from dpviz.engines.ddp.rank import PROGRAM as DDP, step
from dpviz.engines.fsdp.wrapping import wrap

PROGRAM = dataclasses.replace(DDP, wrap=wrap, step=partial(step, cast=False))

"""Tensor parallelism's rank program: the hooks it fills in the program every process engine's ranks run
(dpviz.engines.ranks.program).

    PROGRAM.loader      the run's own DataLoader on every rank: the same rows, the whole batch, as one process loads
    PROGRAM.wrap        parallelize_module with the model's declared plan, and the observer (parallel.py)
    PROGRAM.schedule    every batch of every epoch
    PROGRAM.step        DDP's forward, loss, backward and optimizer step, inside CommDebugMode
    PROGRAM.optimizer   torch's optimizer over every parameter: its state follows each parameter's slice
    PROGRAM.merge       every rank's report made one trace (merge.py)
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

from dpviz.config import RunConfig
from dpviz.engines.ddp.rank import PROGRAM as DDP, step as ddp_step
from dpviz.engines.ranks.program import Step
from dpviz.engines.tp.merge import to_trace
from dpviz.engines.tp.parallel import wrap


def loader(config: RunConfig, plain: Any, rank: int, world: int) -> tuple[Any, None]:
    """The run's own DataLoader (its order, its seed): every rank reads the same rows."""
    return plain, None


def steps_per_epoch(config: RunConfig) -> int:
    return math.ceil(config.data_size / config.batch_size)


def schedule(config: RunConfig, world: int, rank: int):
    """(step, epoch) for every batch of every epoch, on every rank."""
    per_epoch = steps_per_epoch(config)
    for epoch in range(config.epochs):
        for step in range(per_epoch):
            yield epoch * per_epoch + step, epoch


def step(s: Step) -> None:
    """One step, as DDP's rank runs it (no autocast: full precision), with CommDebugMode watching."""
    with s.observer.recording(), warnings.catch_warnings():
        # CommDebugMode's module tracker hooks every module's backward, and torch warns when a module's inputs need
        # no gradient (the first Linear's input is the data): the tracker's doing, no fault of the run.
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        ddp_step(s, cast=False)


PROGRAM = dataclasses.replace(DDP, loader=loader, wrap=wrap, schedule=schedule, step=step, merge=to_trace,
                              around=None, report=None)

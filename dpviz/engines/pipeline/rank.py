"""A pipeline's rank program: the hooks it fills in the program every process engine's ranks run
(dpviz.engines.ranks.program). Each rank is one stage.

    PROGRAM.keep        the stage's layers of the model every rank built from the run's seed (stages.py)
    PROGRAM.loader      the run's DataLoader on the first stage (the rows) and the last (the rows its targets are
                        made from, as a last stage reads the labels); none on the stages between
    PROGRAM.wrap        torch's PipelineStage around the stage's layers, and the observer that times it
    PROGRAM.schedule    every step of the run, on every stage: the microbatches are inside each
    PROGRAM.step        torch's schedule's `step` (ScheduleGPipe or Schedule1F1B) over the step's microbatches: rows
                        into the first stage, targets into the last, nothing into the others; then the optimizer
    PROGRAM.optimizer   torch's optimizer over the stage's own parameters (none for a stage with nothing to learn)
    PROGRAM.merge       every stage's report made one trace (merge.py)
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from dpviz.config import RunConfig
from dpviz.engines.pipeline.merge import to_trace
from dpviz.engines.pipeline.observer import StageObserver
from dpviz.engines.pipeline.stages import stage_module
from dpviz.engines.ranks.program import RankProgram, Step, local, whole_optimizer
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.engines.workload.memory import nbytes

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


@dataclass
class Pipe:
    """What a stage's step calls: torch's stage, and its schedule once the step knows the loss it computes."""

    stage: PipelineStage
    module: torch.nn.Module
    schedule: Any = None


def keep(model: torch.nn.Module, config: RunConfig, rank: int, world: int) -> torch.nn.Module:
    """This stage's layers: the ones it holds, trains and reports."""
    module, _ = stage_module(model, config.model, world, rank)
    return module


def loader(config: RunConfig, plain: Any, rank: int, world: int) -> tuple[Any, None]:
    """The run's own DataLoader (its order, its seed) on the first stage and the last; none between."""
    return (plain if rank in (0, world - 1) else None), None


def schedule(config: RunConfig, world: int, rank: int):
    """(step, epoch) for every full batch, epoch after epoch: a last batch smaller than the others is left out (its
    microbatches could not match the first step's, which the stages' buffers are shaped by)."""
    per_epoch = config.data_size // config.batch_size
    for epoch in range(config.epochs):
        for step in range(per_epoch):
            yield epoch * per_epoch + step, epoch


def wrap(module: torch.nn.Module, config: RunConfig, rank: int, cuda: bool, local_rank: int,
         memory_steps: set[int]) -> tuple[Pipe, StageObserver, float]:
    """torch's PipelineStage around this stage's layers (it sends nothing yet: shapes are agreed in the first step)."""
    begin = time.perf_counter()
    world = dist.get_world_size()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    stage = PipelineStage(module, rank, world, device)
    built = time.perf_counter()
    observer = StageObserver(rank, stage, module, cuda, memory_steps, last=rank == world - 1,
                             rows=config.batch_size // config.microbatches)
    observer.add("stage", begin, built)
    observer.snapshot("stage")
    return Pipe(stage, module), observer, built - begin


def step(s: Step) -> None:
    """One step of this stage: its part of torch's schedule over the step's microbatches, then the optimizer."""
    pipe, observer, config = s.wrapped, s.observer, s.config
    if pipe.schedule is None:  # the loss is the workload's, timed on the last stage
        pipe.schedule = SCHEDULES[config.schedule](pipe.stage, n_microbatches=config.microbatches,
                                                   loss_fn=observer.timed_loss(s.work.loss))
    first, last = s.rank == 0, s.rank == s.world - 1
    if first:
        args, kwargs = s.call
        x = first_tensor((args, kwargs))
        s.entry["input_shape"] = list(x.shape)
    if last:
        args, kwargs = s.call
        x = first_tensor((args, kwargs))
        target = s.work.target(s.teacher, x, args, kwargs)
        observer.labels(observer.now())
        losses: list = []
    if first:
        pipe.schedule.step(*args, **kwargs)
    elif last:
        output = pipe.schedule.step(target=target, losses=losses)
        out = first_tensor(output)
        s.entry["output_shape"] = list(out.shape) if out is not None else []
    else:
        pipe.schedule.step()
    observer.schedule_ended()
    observer.set("gradients", sum(nbytes(local(p.grad)) for p in s.model.parameters() if p.grad is not None))
    observer.snapshot("backward")
    if s.optimizer is not None:
        start = observer.now()
        s.optimizer.step()
        s.optimizer.zero_grad(set_to_none=False)
        observer.add("step", start, observer.now())
        observer.set("optimizer state", nbytes([local(value) for kept in s.holder.state.values()
                                                for value in kept.values() if isinstance(value, torch.Tensor)]))
        observer.snapshot("step")


def optimizer(config: RunConfig, trainable: list, passed: Any) -> tuple[Any, Any]:
    """torch's optimizer over this stage's parameters; none where the stage has nothing to learn (a ReLU alone)."""
    return whole_optimizer(config, trainable, passed) if trainable else (None, None)


PROGRAM = RankProgram(loader=loader, wrap=wrap, schedule=schedule, step=step, optimizer=optimizer, merge=to_trace,
                      keep=keep)

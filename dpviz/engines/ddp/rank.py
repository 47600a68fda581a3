"""DistributedDataParallel's rank program: the hooks it fills in the program every process engine's ranks run
(dpviz.engines.ranks.program), and that ZeRO-1 (its optimizer) and FSDP (its wrap) fill otherwise.

    PROGRAM.loader      each rank's DataLoader over its DistributedSampler shard (or a hand-split shard: uneven)
    PROGRAM.wrap        DistributedDataParallel around the model (its constructor broadcasts rank 0's parameters)
    PROGRAM.schedule    the steps this rank takes, epoch after epoch (DistributedSampler's rows, sampler_rows.rank_loads)
    PROGRAM.step        forward, loss, backward (the all-reduces launched from inside), optimizer step; under
                        no_sync() while gradients accumulate
    PROGRAM.around      ddp.join() around the loop when asked
    PROGRAM.optimizer   torch's optimizer over every parameter
    PROGRAM.merge       every rank's report made one trace (merge.py)

Each rank builds the same model from the run's seed (DDP broadcasts rank 0's weights anyway), loads its shard
with DistributedSampler (shuffled with the run's seed, drop_last=False: the padding rows stay visible) through its
own DataLoader of ceil(batch_size / ranks) rows, and trains or runs forward as the DataParallel engine does.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any

import torch
from torch.distributed.algorithms.join import Join, Joinable
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from dpviz.config import RunConfig
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.ddp.observer import RankObserver
from dpviz.engines.ddp.sampler_rows import per_rank_batch, rank_loads, rank_shares, shard_start
from dpviz.engines.ranks.program import RankProgram, Step, local, whole_optimizer
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.engines.workload.memory import nbytes, stored_bytes
from dpviz.engines.workload.precision import autocast


def loader(config: RunConfig, plain: Any, rank: int, world: int) -> tuple[DataLoader, DistributedSampler | None]:
    """This rank's DataLoader: over its DistributedSampler shard, or over the contiguous shard of rows it was
    handed when the data is split by hand (`uneven`); and its sampler, whose epoch the loop sets."""
    batch = config.batch_size if config.batch_per_process else per_rank_batch(config.batch_size, world)
    if config.uneven:
        start = shard_start(config.data_size, world, rank)
        share = rank_shares(config.data_size, world, uneven=True)[rank]
        shard = list(range(start, start + share))
        batches = [shard[i:i + batch] for i in range(0, share, batch)]
        return DataLoader(plain.dataset, batch_sampler=batches, collate_fn=plain.collate_fn), None
    sampler = DistributedSampler(plain.dataset, num_replicas=world, rank=rank, shuffle=config.shuffle,
                                 seed=config.seed, drop_last=config.drop_last)
    return DataLoader(plain.dataset, batch_size=batch, sampler=sampler, collate_fn=plain.collate_fn), sampler


def schedule(config: RunConfig, world: int, rank: int):
    """(global step, epoch) for every batch this rank's loader gives, epoch after epoch."""
    steps = rank_loads(config.data_size, config.batch_size, world, batch_per_process=config.batch_per_process,
                       drop_last=config.drop_last, uneven=config.uneven, epochs=config.epochs)
    per_epoch = len(steps) // config.epochs
    for step, rows in enumerate(steps):
        if rows[rank]:
            yield step, step // per_epoch


def step(s: Step, cast: bool = True) -> None:
    """One step of this rank: its forward (the observer times the module's inside), and when training its loss,
    backward and, on a step that synchronises, the optimizer's step; under no_sync() while gradients accumulate.
    A mixed-precision run computes forward and the loss under torch.autocast (`cast`; FSDP's policy casts instead)."""
    config, observer = s.config, s.observer
    args, kwargs = s.call
    x = first_tensor((args, kwargs))  # the rows themselves, whatever form the model takes them in
    syncs = not config.train or (s.index + 1) % config.accumulate == 0 or s.index == s.last
    context = contextlib.nullcontext() if syncs else s.wrapped.no_sync()
    device = x.device.type if isinstance(x, torch.Tensor) else "cpu"
    compute = (lambda: autocast(config, device)) if cast else contextlib.nullcontext
    with context:
        with compute():
            output = s.wrapped(*args, **kwargs)
        rows = len(s.entry["ids"])
        out = first_tensor(output)  # a tuple or dict output: its first tensor, as DataParallel shows
        out_shape = list(out.shape) if out is not None else []
        in_shape = list(x.shape) if isinstance(x, torch.Tensor) else []
        s.entry.update(input_shape=in_shape, output_shape=out_shape)
        observer.returned(output)
        observer.snapshot("forward")
        if config.train:
            _train(config, s.work, observer, s.model, output, s.teacher, x, (args, kwargs), out_shape, rows, syncs,
                   s.optimizer, s.holder, compute)


def report(wrapped: Any, result: dict, ended: bool) -> None:
    """What DDP's reducer says of its buckets: their sizes as built, and as rebuilt after the first step."""
    logged = _logged(wrapped)
    if not ended:
        result["reducer"] = {"bucket_sizes": _sizes(logged.get("bucket_sizes"))}
    elif logged:
        result["reducer"]["rebuilt_bucket_sizes"] = _sizes(logged.get("rebuilt_bucket_sizes"))


def around(wrapped: Any, observer: RankObserver, config: RunConfig, optimizer: Any = None):
    """ddp.join() around the loop when the run asks for it (config.join); nothing otherwise."""
    return _joined(wrapped, observer, config.join, optimizer)


def wrap_ddp(model: torch.nn.Module, config: RunConfig, rank: int, cuda: bool, local_rank: int,
             memory_steps: set[int]) -> tuple[DistributedDataParallel, RankObserver, float]:
    """DDP around `model` (its constructor broadcasts rank 0's parameters), the observer that times it, and the
    constructor's seconds. An engine that wraps the model otherwise fills its program's `wrap` with its own."""
    begin = time.perf_counter()
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None,
                                  bucket_cap_mb=config.bucket_cap_mb, find_unused_parameters=config.find_unused)
    constructed = time.perf_counter()
    observer = RankObserver(rank, ddp, cuda, memory_steps, "NCCL" if cuda else "gloo", config.dim)
    observer.add("broadcast", begin, constructed)
    observer.hold("gradient buckets", sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad))
    observer.snapshot("broadcast")
    return ddp, observer, constructed - begin


def _logged(wrapped: Any) -> dict:
    """DDP's logging data (its buckets); nothing for a model wrapped otherwise."""
    return wrapped._get_ddp_logging_data() if isinstance(wrapped, DistributedDataParallel) else {}


def _train(config, work, observer: RankObserver, model, output, teacher, x, call, out_shape, rows, syncs,
           optimizer, holder, compute=contextlib.nullcontext) -> None:
    start = observer.now()
    target = work.target(teacher, x, *call)  # the data's targets: outside autocast, in float32
    with compute():
        loss = work.loss(output, target) / config.accumulate  # accumulated grads are a sum
    observer.add("loss", start, observer.now())
    observer.hold("output and loss", nbytes(loss))
    observer.snapshot("loss")
    start = observer.now()
    loss.backward()  # the all-reduces are launched from inside, bucket by bucket
    observer.add("backward", start, observer.now(), (0, rows), (out_shape, None))
    observer.drop("activations")
    observer.set("gradients", stored_bytes([local(p.grad) for p in model.parameters() if p.grad is not None]))
    observer.snapshot("backward")
    if syncs:
        start = observer.now()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        observer.add("step", start, observer.now())
        # This rank's own (a shard under ZeRO): its buffers per element of a parameter (SGD's momentum, Adam's two
        # moments), as its held facts, DataParallel's ledger and the plans count them; Adam's step counters, one
        # number per parameter tensor, left out, so that every engine's bars on the Memory page count alike.
        observer.set("optimizer state", stored_bytes([local(value) for kept in holder.state.values() for value in
                                                      kept.values() if isinstance(value, torch.Tensor) and value.dim() > 0]))
        observer.snapshot("step")


@contextlib.contextmanager
def _joined(ddp: DistributedDataParallel, observer: RankObserver, join: bool, optimizer=None):
    """ddp.join() around the loop when asked: a rank that runs out of batches keeps answering the
    others' collectives (with zeros) until they finish too; timed as this rank's `join` span. An optimizer
    that has collectives of its own (ZeRO-1 broadcasts each shard after its step) joins beside DDP."""
    if not join:
        yield
        return
    others = [optimizer] if isinstance(optimizer, Joinable) else []
    with Join([ddp, *others]) if others else ddp.join():
        yield
        joining, observer.step = observer.now(), observer.last_step
    observer.add("join", joining, observer.now())


def _sizes(text: Any) -> list[int]:
    """DDP's logging data gives bucket sizes as '273448, 263168'."""
    return [int(part) for part in str(text).split(",") if part.strip()] if text else []


PROGRAM = RankProgram(loader=loader, wrap=wrap_ddp, schedule=schedule, step=step, optimizer=whole_optimizer,
                      merge=to_trace, around=around, report=report)

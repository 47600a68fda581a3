"""One rank of a DistributedDataParallel run: what every process runs, started by dpviz or by torchrun.

    run_rank(config, rank, world, init=lambda: dist.init_process_group(...))   # -> this rank's results

Each rank builds the same model from the run's seed (DDP broadcasts rank 0's weights anyway), loads its
shard with DistributedSampler (shuffled with the run's seed, epoch 0, drop_last=False: the padding rows
stay visible) through its own DataLoader of ceil(batch_size / ranks) rows, and trains or runs forward as
the DataParallel engine does. Everything it reports is plain data: it crosses a process boundary.
"""
from __future__ import annotations

import contextlib
import datetime
import re
import socket
import threading
import time
import warnings
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join, Joinable
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.config import RunConfig
from dpviz.engines import ENGINES
from dpviz.engines.dp.memory import nbytes
from dpviz.engines.ddp.observer import RankObserver
from dpviz.engines.ddp.sharding import per_rank_batch, plan, rank_shares, shard_start

CLOCK_ROUNDS = 5  # barriers whose exit times give each rank's clock offset from rank 0


def timeout(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


def run_rank(config: RunConfig, rank: int, world: int, init: Callable[[], None], *, cuda: bool = False,
             local_rank: int = 0, launched: float | None = None, fault: tuple | None = None,
             keep_parameters: bool = False, on_step: Callable[[int], None] | None = None,
             on_load: Callable[[int, list[int]], None] | None = None, workload: Any = None) -> dict[str, Any]:
    """Run `config` as rank `rank` of `world`; return what this rank saw. `init` joins the process group.

    `fault` = (rank, step, "raise" | "hang") makes that rank fail on purpose (to test the launcher). `workload`:
    the user's own module and batch (dpviz.engines.workload.own), run instead of the catalogue's model."""
    entered = time.perf_counter()
    result: dict[str, Any] = {"rank": rank, "host": socket.gethostname(), "spans": [], "steps": []}
    result["startup"] = {"start": None if launched is None else entered - launched}
    begin = time.perf_counter()
    init()
    result["startup"]["init"] = time.perf_counter() - begin
    try:
        work = tutorial.workload(config, workload)
        _run(config, work, rank, world, cuda, local_rank, fault, keep_parameters, on_step, on_load, result)
    except Exception as error:  # this rank's failure, as its user would read it
        result["failure"] = {"type": type(error).__name__, "message": plain_message(error),
                             "step": max(0, len(result["steps"]) - 1)}
        return result
    try:
        # As a training script does before it saves or exits: every rank meets the others once more. A rank
        # that ran out of batches early waits here while the others still all-reduce (uneven data, no Join).
        dist.barrier()
    except Exception as error:
        result["failure"] = {"type": type(error).__name__, "message": plain_message(error),
                             "step": max(0, len(result["steps"]) - 1), "after_last_step": True}
    return result


def _run(config: RunConfig, work: Any, rank: int, world: int, cuda: bool, local_rank: int, fault: tuple | None,
         keep_parameters: bool, on_step, on_load, result: dict[str, Any]) -> None:
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    result["clock"] = _barrier_times()
    model, loader, sampler = _build(config, work, rank, world)
    model = model.to(device)
    last = config.num_batches - 1
    spec = ENGINES[config.engine]
    wrap = spec.part("wrap") if spec.has("wrap") else wrap_ddp
    ddp, observer, result["startup"]["ddp"] = wrap(model, config, rank, cuda, local_rank, {0, last})
    observer.last_step = last
    optimizer = holder = None  # forward only: no optimizer
    if config.train:
        teacher = work.teacher()
        teacher = teacher.to(device) if teacher is not None else None
        optimizer, holder = _optimizer(config, model, observer.passed)
    result["reducer"] = {"bucket_sizes": _sizes(_logged(ddp).get("bucket_sizes"))}
    caught: list[tuple[str, str, int]] = []
    try:
        with warnings.catch_warnings(record=True) as seen, _joined(ddp, observer, config.join, optimizer):
            warnings.simplefilter("always")  # a process of its own: its filters are its own
            opened = -1  # the epoch whose loader iterator is open
            for step, epoch in _steps(config, world, rank):
                if epoch != opened:
                    if config.set_epoch and sampler is not None:
                        sampler.set_epoch(epoch)  # without it every epoch repeats epoch 0's order
                    iterator, opened = iter(loader), epoch
                observer.step = step
                start = observer.now()
                data, indices = next(iterator)
                data = data.to(device)
                args, kwargs = work.call(data, indices.tolist())  # the rows as the model takes them
                observer.add("load", start, observer.now())
                observer.hold("rows loaded", work.loaded_bytes(data, args, kwargs))
                observer.snapshot("load")
                ids = indices.tolist()
                entry = {"ids": ids, "input_shape": [], "output_shape": []}
                result["steps"].append(entry)
                if on_load is not None:  # the launcher knows every rank's rows even if this rank never reports
                    on_load(step, ids)
                if fault is not None and fault[0] == rank and fault[1] == step:
                    if fault[2] == "hang":
                        threading.Event().wait()  # never answers: the others wait in their next collective
                    raise RuntimeError(f"rank {rank} was told to fail in step {step}")
                x = first_tensor((args, kwargs))  # the rows themselves, whatever form the model takes them in
                syncs = not config.train or (step + 1) % config.accumulate == 0 or step == last
                context = contextlib.nullcontext() if syncs else ddp.no_sync()
                with context:
                    output = ddp(*args, **kwargs)  # the observer times the module's forward inside
                    rows = len(ids)
                    out = first_tensor(output)  # a tuple or dict output: its first tensor, as DataParallel shows
                    out_shape = list(out.shape) if out is not None else []
                    in_shape = list(x.shape) if isinstance(x, torch.Tensor) else []
                    entry.update(input_shape=in_shape, output_shape=out_shape)
                    observer.hold("output and loss", nbytes(output))
                    observer.snapshot("forward")
                    if config.train:
                        _train(config, work, observer, model, output, teacher, x, (args, kwargs), out_shape, rows,
                               syncs, optimizer, holder)
                caught += [(w.category.__name__, str(w.message), step) for w in seen]
                seen.clear()
                observer.step_ended()
                if on_step is not None:
                    on_step(step)
    finally:  # what this rank saw up to where it stopped, a failure included
        caught += [(w.category.__name__, str(w.message), len(result["steps"]) - 1) for w in seen]
        observer.close()
        result.update(spans=observer.spans, layouts=observer.layouts, memory=observer.memory_samples, warnings=caught,
                      held=held(model, holder), facts=observer.facts(), moved=observer.moved_rows())
        if _logged(ddp):
            result["reducer"]["rebuilt_bucket_sizes"] = _sizes(_logged(ddp).get("rebuilt_bucket_sizes"))
    if keep_parameters:
        # As numpy arrays: a tensor would cross the queue as shared memory the exited process no longer serves.
        # A sharded parameter (a DTensor) is gathered whole (every rank takes part), and its shard kept beside.
        result["parameters"] = {name: _array(p.full_tensor() if _sharded(p) else p) for name, p in model.named_parameters()}
        if any(_sharded(p) for p in model.parameters()):
            result["shards"] = {name: _array(local(p)) for name, p in model.named_parameters()}
        if holder is not None:  # what torch's optimizer on this rank says it holds (its state_dict)
            result["optimizer_state"] = [{key: _array(local(value)) for key, value in kept.items()
                                          if isinstance(value, torch.Tensor)}
                                         for kept in holder.state_dict()["state"].values()]


def wrap_ddp(model: torch.nn.Module, config: RunConfig, rank: int, cuda: bool, local_rank: int,
             memory_steps: set[int]) -> tuple[DistributedDataParallel, RankObserver, float]:
    """DDP around `model` (its constructor broadcasts rank 0's parameters), the observer that times it, and the
    constructor's seconds. An engine that wraps the model otherwise names its own function as its spec's `wrap`."""
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


def _sharded(tensor: torch.Tensor) -> bool:
    return hasattr(tensor, "to_local")  # a DTensor: this rank holds a shard of it


def local(tensor: torch.Tensor) -> torch.Tensor:
    """What this rank itself holds of `tensor`: its shard when it is sharded (a DTensor), else all of it."""
    return tensor.to_local() if _sharded(tensor) else tensor


def _array(tensor: torch.Tensor):
    return tensor.detach().cpu().numpy().copy()


def _train(config, work, observer: RankObserver, model, output, teacher, x, call, out_shape, rows, syncs,
           optimizer, holder) -> None:
    start = observer.now()
    target = work.target(teacher, x, *call)
    loss = work.loss(output, target) / config.accumulate  # accumulated grads are a sum
    observer.add("loss", start, observer.now())
    observer.hold("output and loss", nbytes(loss))
    observer.snapshot("loss")
    start = observer.now()
    loss.backward()  # the all-reduces are launched from inside, bucket by bucket
    observer.add("backward", start, observer.now(), (0, rows), (out_shape, None))
    observer.drop("activations")
    observer.set("gradients", sum(nbytes(local(p.grad)) for p in model.parameters() if p.grad is not None))
    observer.snapshot("backward")
    if syncs:
        start = observer.now()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        observer.add("step", start, observer.now())
        observer.set("optimizer state", nbytes([local(value) for kept in holder.state.values() for value in kept.values()
                                                if isinstance(value, torch.Tensor)]))  # this rank's own, a shard under ZeRO
        observer.snapshot("step")


def held(model: torch.nn.Module, holder: torch.optim.Optimizer | None) -> dict[str, Any]:
    """What this rank holds at the end of its run, by kind, counted from the tensors themselves: its parameters,
    their gradients, and the state of the optimizer that steps on this rank (`holder`: under ZeRO-1 the local
    optimizer of its own shard), with the parameters whose state that is (`owns`, [name, elements] each).
    The state counts the tensors kept per element of a parameter (SGD's momentum buffer, Adam's two moments);
    Adam's step counters, one number per parameter tensor, are left out."""
    names = {id(p): name for name, p in model.named_parameters()}
    parameters = [local(p) for p in model.parameters()]  # a sharded parameter (FSDP): the rank's own shard
    gradients = [local(p.grad) for p in model.parameters() if p.grad is not None]
    state = [] if holder is None else [local(value) for kept in holder.state.values() for value in kept.values()
                                       if isinstance(value, torch.Tensor) and value.dim() > 0]
    owns = [] if holder is None else [[names[id(p)], local(p).numel()] for group in holder.param_groups
                                      for p in group["params"]]
    count = lambda tensors: {"elements": sum(t.numel() for t in tensors),
                             "bytes": sum(t.numel() * t.element_size() for t in tensors)}
    return {"parameters": count(parameters), "gradients": count(gradients), "optimizer state": count(state),
            "owns": owns}


def _optimizer(config: RunConfig, model: torch.nn.Module, passed: Callable[..., None]
               ) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
    """The optimizer this rank steps, and the one whose state it holds: the engine's own when it names one
    (ZeRO-1 hands each rank a shard of the parameters to step), else one whole optimizer over every parameter.
    `passed(collective, bytes, calls)` writes down what an optimizer with collectives of its own hands them."""
    kind, settings = tutorial.optimizer_of(config)
    trainable = [p for p in model.parameters() if p.requires_grad]  # a frozen part has no state
    spec = ENGINES[config.engine]
    if spec.has("optimizer"):
        return spec.part("optimizer")(trainable, kind, settings, passed)
    optimizer = kind(trainable, **settings)
    return optimizer, optimizer


def _build(config: RunConfig, work: Any, rank: int, world: int):
    """The same model on every rank, and this rank's DataLoader: over its DistributedSampler shard, or
    over the contiguous shard of rows it was handed when the data is split by hand (`uneven`)."""
    model, plain = work.build()  # the DataParallel engine's model and dataset, from the same seed
    batch = config.batch_size if config.batch_per_process else per_rank_batch(config.batch_size, world)
    if config.uneven:
        start = shard_start(config.data_size, world, rank)
        share = rank_shares(config.data_size, world, uneven=True)[rank]
        shard = list(range(start, start + share))
        batches = [shard[i:i + batch] for i in range(0, share, batch)]
        return model, DataLoader(plain.dataset, batch_sampler=batches, collate_fn=plain.collate_fn), None
    sampler = DistributedSampler(plain.dataset, num_replicas=world, rank=rank, shuffle=config.shuffle,
                                 seed=config.seed, drop_last=config.drop_last)
    return model, DataLoader(plain.dataset, batch_size=batch, sampler=sampler, collate_fn=plain.collate_fn), sampler


def _steps(config: RunConfig, world: int, rank: int):
    """(global step, epoch) for every batch this rank's loader gives, epoch after epoch."""
    steps = plan(config.data_size, config.batch_size, world, batch_per_process=config.batch_per_process,
                 drop_last=config.drop_last, uneven=config.uneven, epochs=config.epochs)
    per_epoch = len(steps) // config.epochs
    for step, rows in enumerate(steps):
        if rows[rank]:
            yield step, step // per_epoch


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


def plain_message(error: BaseException) -> str:
    """The error's own words: without the future callbacks' wrapping ("Got the following error when
    running the callback: RuntimeError: ..."), their "At:" stacks and gloo's source locations."""
    message = str(error).strip()
    wrapper = re.compile(r"^Got the following error when running the callback: \w+: ")
    while wrapper.match(message):
        message = wrapper.sub("", message, count=1)
    message = message.split("\n\nAt:")[0]
    return re.sub(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\] ", "", message).strip()


def _barrier_times() -> list[float]:
    """When this rank left each of a few barriers: against rank 0's, its clock offset."""
    times = []
    for _ in range(CLOCK_ROUNDS):
        dist.barrier()
        times.append(time.perf_counter())
    return times


def _sizes(text: Any) -> list[int]:
    """DDP's logging data gives bucket sizes as '273448, 263168'."""
    return [int(part) for part in str(text).split(",") if part.strip()] if text else []

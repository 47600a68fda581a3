"""One rank of any engine whose lanes are processes: a named program whose hooks the engine fills, run by the
same loop on every rank, started by dpviz (launch.py) or by torchrun (torchrun.py).

    PROGRAM = RankProgram(loader=..., wrap=..., schedule=..., step=..., optimizer=..., merge=...)   # an engine's
    run_rank(PROGRAM, config, rank, world, init=lambda: dist.init_process_group(...))   # -> this rank's results

The loop is what DDP, ZeRO-1 and FSDP share: join the group, measure the clocks, build the run's model from its
seed, wrap it (`wrap`: DDP, fully_shard, a pipeline's stage), make the optimizer (`optimizer`), then for every
step the `schedule` gives this rank: load its rows when it has a loader (`loader`: a pipeline's later stages have
none), and run the step (`step`: one forward and backward under DDP, microbatches through the stages under a
pipeline), inside whatever the engine runs its loop in (`around`: DDP's join). Whatever stops it, the observer
closes and what the rank saw and holds is reported; everything reported is plain data: it crosses a process
boundary. The engine's `merge` makes one trace of every rank's report.
"""
from __future__ import annotations

import re
import socket
from contextlib import nullcontext
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterable

import torch
import torch.distributed as dist

from dpviz.config import RunConfig
from dpviz.engines.processes import delta
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.workload.memory import stored_bytes

CLOCK_ROUNDS = 5  # barriers whose exit times give each rank's clock offset from rank 0
# How long a collective before the first step may wait (the clocks' barriers, DDP's broadcast, a shard's setup):
# ranks start seconds apart on a busy machine, which is no failure of the run. The steps' collectives wait the
# run's own timeout (RunConfig.timeout_s), which is what a hang in a step is shown against.
SETUP_TIMEOUT_S = 120.0


@dataclass
class Step:
    """What a step hook is handed: the run, this rank's model and observer, and the step's rows as loaded."""

    config: RunConfig
    work: Any  # the workload: the model's inputs, targets and loss (dpviz.engines.workload.tutorial_data)
    rank: int
    world: int
    index: int  # the global step
    last: int  # the last step of the run
    model: torch.nn.Module  # as built (its parameters are what the rank holds)
    wrapped: Any  # what a step calls: DDP around the model, the sharded model, a pipeline's schedule
    observer: Any  # dpviz.engines.ddp.observer.RankObserver or a subclass: spans and a memory ledger
    optimizer: Any  # what the step steps (None without training)
    holder: Any  # the optimizer whose state this rank holds
    teacher: Any  # the model a training run's targets come from, if its workload has one
    entry: dict  # this step's record: its rows' ids and shapes
    call: tuple[tuple, dict] | None = None  # the model's arguments for the rows this rank loaded (None: it loads none)


@dataclass(frozen=True)
class RankProgram:
    """What one rank runs, as hooks an engine fills; the loop that calls them is the same for every engine."""

    # (config, dataset, rank, world) -> (this rank's DataLoader or None when it loads no rows, its sampler or None)
    loader: Callable[[RunConfig, Any, int, int], tuple[Any, Any]]
    # (model, config, rank, cuda, local_rank, memory_steps) -> (what a step calls, its observer, seconds it took)
    wrap: Callable[..., tuple[Any, Any, float]]
    # (config, world, rank) -> (global step, epoch) for every step this rank takes part in
    schedule: Callable[[RunConfig, int, int], Iterable[tuple[int, int]]]
    step: Callable[[Step], None]  # one step's forward, backward and optimizer step, timed by the observer
    # (config, trainable parameters, passed) -> (the optimizer stepped, the one whose state this rank holds)
    optimizer: Callable[[RunConfig, list, Callable[..., None]], tuple[Any, Any]]
    # (every rank's report, launched) -> the run's trace (keyword arguments: backend, torch_version, ...)
    merge: Callable[..., Any]
    # (wrapped, observer, config, optimizer) -> what the loop runs inside (DDP's join); None: nothing
    around: Callable[..., ContextManager] | None = None
    # (wrapped, result, ended) writes into this rank's report what the wrapper itself says, before the first step
    # and after the last (DDP's reducer: its buckets, then as rebuilt); None: nothing
    report: Callable[[Any, dict, bool], None] | None = None
    # (model, config, rank, world) -> the part of the model this rank holds, trains and reports (a pipeline's stage);
    # None: all of it
    keep: Callable[..., torch.nn.Module] | None = None


EVERY_STEP = "every step"  # keep_parameters: the parameters after each step too, not only at the end


def _whole_parameters(model: torch.nn.Module) -> dict[str, Any]:
    """Every parameter whole, as numpy arrays (a tensor would cross the queue as shared memory the exited process no
    longer serves); a sharded one (a DTensor) gathered, which every rank takes part in."""
    return {name: _array(p.full_tensor() if _sharded(p) else p) for name, p in model.named_parameters()}


def run_rank(program: RankProgram, config: RunConfig, rank: int, world: int, init: Callable[[], None], *,
             cuda: bool = False, local_rank: int = 0, launched: float | None = None, fault: tuple | None = None,
             keep_parameters: bool | str = False, on_step: Callable[[int], None] | None = None,
             on_load: Callable[[int, list[int]], None] | None = None, workload: Any = None,
             timeout_s: float | None = None) -> dict[str, Any]:
    """Run `config` as rank `rank` of `world`; return what this rank saw. `init` joins the process group, its
    collectives timing out after `setup_timeout(timeout_s)`; from the first step on they time out after `timeout_s`.

    `keep_parameters`: True keeps the parameters (whole), buffers and optimizer state at the end; EVERY_STEP also
    the parameters after each training step. `fault` = (rank, step, "raise" | "hang") makes that rank fail on purpose, and (rank, seconds, "late") makes it
    start its first collective that late, as a rank on a busy machine may (to test the launcher). `workload`:
    the user's own module and batch (dpviz.engines.workload.own), run instead of the catalogue's model."""
    entered = time.perf_counter()
    result: dict[str, Any] = {"rank": rank, "host": socket.gethostname(), "spans": [], "steps": []}
    result["startup"] = {"start": None if launched is None else entered - launched}
    begin = time.perf_counter()
    init()
    result["startup"]["init"] = time.perf_counter() - begin
    try:
        work = tutorial.workload(config, workload)
        _run(program, config, work, rank, world, cuda, local_rank, fault, keep_parameters, on_step, on_load, result,
             timeout_s)
    except Exception as error:  # this rank's failure, as its user would read it
        result["failure"] = {"type": type(error).__name__, "message": plain_message(error),
                             "step": max(0, len(result["steps"]) - 1)}
        return result
    try:
        # As a training script does before it saves or exits: every rank meets the others once more. A rank
        # that ran out of batches early waits here while the others still all-reduce (uneven data, no Join).
        # It waits longer than a step's collective does, so that the rank still in a step times out first and
        # ends with gloo's timeout, not with "connection closed" from a finished rank that gave up before it.
        if timeout_s is not None:
            dist.distributed_c10d._set_pg_timeout(delta(2 * timeout_s))
        dist.barrier()
    except Exception as error:
        result["failure"] = {"type": type(error).__name__, "message": plain_message(error),
                             "step": max(0, len(result["steps"]) - 1), "after_last_step": True}
    return result


def _run(program: RankProgram, config: RunConfig, work: Any, rank: int, world: int, cuda: bool, local_rank: int,
         fault: tuple | None, keep_parameters: bool | str, on_step, on_load, result: dict[str, Any],
         timeout_s: float | None) -> None:
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if fault is not None and fault[0] == rank and fault[2] == "late":
        time.sleep(fault[1])
    result["clock"] = _barrier_times()
    model, plain = work.build()  # the same model on every rank, from the run's seed
    if program.keep is not None:
        model = program.keep(model, config, rank, world)
    loader, sampler = program.loader(config, plain, rank, world)
    model = model.to(device)
    last = config.num_batches - 1
    wrapped, observer, result["startup"]["ddp"] = program.wrap(model, config, rank, cuda, local_rank, {0, last})
    observer.last_step = last
    optimizer = holder = teacher = None  # forward only: no optimizer
    if config.train:
        teacher = work.teacher()
        teacher = teacher.to(device) if teacher is not None else None
        trainable = [p for p in model.parameters() if p.requires_grad]  # a frozen part has no state
        optimizer, holder = program.optimizer(config, trainable, observer.passed)
    if program.report is not None:
        program.report(wrapped, result, False)
    around = program.around(wrapped, observer, config, optimizer) if program.around is not None else nullcontext()
    if timeout_s is not None:
        dist.distributed_c10d._set_pg_timeout(delta(timeout_s))  # setup is over: a step's wait is the run's timeout
    caught: list[tuple[str, str, int]] = []
    try:
        with warnings.catch_warnings(record=True) as seen, around:
            warnings.simplefilter("always")  # a process of its own: its filters are its own
            opened = -1  # the epoch whose loader iterator is open
            for index, epoch in program.schedule(config, world, rank):
                if loader is not None and epoch != opened:
                    if config.set_epoch and sampler is not None:
                        sampler.set_epoch(epoch)  # without it every epoch repeats epoch 0's order
                    iterator, opened = iter(loader), epoch
                observer.step = index
                call, ids = _load(work, observer, iterator, device) if loader is not None else (None, [])
                entry = {"ids": ids, "input_shape": [], "output_shape": []}
                result["steps"].append(entry)
                if loader is not None and on_load is not None:  # the launcher knows every rank's rows even if
                    on_load(index, ids)  # this rank never reports
                step = Step(config, work, rank, world, index, last, model, wrapped, observer, optimizer, holder,
                            teacher, entry, call)
                if fault is not None and fault[0] == rank and fault[1] == index and fault[2] != "late":
                    if fault[2] == "hang":
                        threading.Event().wait()  # never answers: the others wait in their next collective
                    raise RuntimeError(f"rank {rank} was told to fail in step {index}")
                program.step(step)
                if keep_parameters == EVERY_STEP and config.train:  # each step's result, for tests held to torch's
                    result.setdefault("parameters_by_step", []).append(_whole_parameters(model))
                caught += [(w.category.__name__, str(w.message), index) for w in seen]
                seen.clear()
                observer.step_ended()
                if on_step is not None:
                    on_step(index)
            if observer.step < last and last in observer.memory_steps and result["steps"]:
                # Out of batches before the last sampled step (data split by hand): this rank waits at the end
                # (a barrier, or join's shadowing) holding its model's state while the others still run it.
                result["waiting"] = {"step": last, "held": observer.holding()}
    finally:  # what this rank saw up to where it stopped, a failure included
        caught += [(w.category.__name__, str(w.message), len(result["steps"]) - 1) for w in seen]
        observer.close()  # a step that raised is settled here (FSDP: its modules resharded) before `held` reads them
        # What was recorded first, as it stands: a count below that fails must not take the spans with it.
        result.update(spans=observer.spans, layouts=observer.layouts, memory=observer.memory_samples, warnings=caught,
                      moved=observer.moved_rows())
        result.update(held=held(model, holder), facts=observer.facts())
        if program.report is not None:
            program.report(wrapped, result, True)
    if keep_parameters:
        # As numpy arrays: a tensor would cross the queue as shared memory the exited process no longer serves.
        # A sharded parameter (a DTensor) is gathered whole (every rank takes part), and its shard kept beside.
        result["parameters"] = _whole_parameters(model)
        # Its buffers as they stand (a BatchNorm's running statistics, from this rank's own rows: DDP broadcasts
        # rank 0's before each forward, FSDP and a pipeline's stages keep each their own).
        result["buffers"] = {name: _array(b) for name, b in model.named_buffers()}
        if any(_sharded(p) for p in model.parameters()):
            result["shards"] = {name: _array(local(p)) for name, p in model.named_parameters()}
        if holder is not None:  # what torch's optimizer on this rank says it holds (its state_dict)
            result["optimizer_state"] = [{key: _array(local(value)) for key, value in kept.items()
                                          if isinstance(value, torch.Tensor)}
                                         for kept in holder.state_dict()["state"].values()]


def setup_timeout(timeout_s: float) -> float:
    """The timeout a rank joins its group with: the run's own, or longer while the ranks still set up."""
    return max(timeout_s, SETUP_TIMEOUT_S)


def _load(work: Any, observer: Any, iterator: Any, device: torch.device) -> tuple[tuple[tuple, dict], list[int]]:
    """This rank's rows of the step as its model takes them, timed as its `load`, and their ids."""
    start = observer.now()
    data, indices = next(iterator)
    data = data.to(device)
    ids = indices.tolist()
    args, kwargs = work.call(data, ids)  # the rows as the model takes them
    observer.add("load", start, observer.now(), rows=(0, len(ids)))  # its rows: a step that fails later still shows them
    observer.hold("rows loaded", work.loaded_bytes(data, args, kwargs))
    observer.snapshot("load")
    return (args, kwargs), ids


def whole_optimizer(config: RunConfig, trainable: list, passed: Callable[..., None]) -> tuple[Any, Any]:
    """torch's optimizer over every trainable parameter: the one it steps is the one whose state it holds."""
    kind, settings = tutorial.optimizer_of(config)
    optimizer = kind(trainable, **settings)
    return optimizer, optimizer


def held(model: torch.nn.Module, holder: torch.optim.Optimizer | None) -> dict[str, Any]:
    """What this rank holds at the end of its run, by kind, counted from the tensors themselves: its parameters,
    their gradients, and the state of the optimizer that steps on this rank (`holder`: under ZeRO-1 the local
    optimizer of its own shard), with the parameters whose state that is (`owns`, [name, elements] each).
    The state counts the tensors kept per element of a parameter (SGD's momentum buffer, Adam's two moments);
    Adam's step counters, one number per parameter tensor, are left out.
    Elements are the model's own (an FSDP shard's real rows); bytes are what torch allocated for them, each
    storage once (stored_bytes): FSDP2 allocates every shard padded to the same rows on every rank, and one
    reduce-scatter output per sharded module that its gradients view."""
    names = {id(p): name for name, p in model.named_parameters()}
    parameters = [local(p) for p in model.parameters()]  # a sharded parameter (FSDP): the rank's own shard
    gradients = [local(p.grad) for p in model.parameters() if p.grad is not None]
    state = [] if holder is None else [local(value) for kept in holder.state.values() for value in kept.values()
                                       if isinstance(value, torch.Tensor) and value.dim() > 0]
    owns = [] if holder is None else [[names[id(p)], local(p).numel()] for group in holder.param_groups
                                      for p in group["params"]]
    count = lambda tensors: {"elements": sum(t.numel() for t in tensors), "bytes": stored_bytes(tensors)}
    return {"parameters": count(parameters), "gradients": count(gradients), "optimizer state": count(state),
            "owns": owns}


def _sharded(tensor: torch.Tensor) -> bool:
    return hasattr(tensor, "to_local")  # a DTensor: this rank holds a shard of it


def local(tensor: torch.Tensor) -> torch.Tensor:
    """What this rank itself holds of `tensor`: its shard when it is sharded (a DTensor), else all of it."""
    return tensor.to_local() if _sharded(tensor) else tensor


def _array(tensor: torch.Tensor):
    return tensor.detach().cpu().numpy().copy()


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

"""A training run of DDP, ZeRO-1 or FSDP with nothing of dpviz watching: the baseline of a recorded step.

    steps = bare_steps("fsdp", RunConfig(engine="fsdp", gpus=2, train=True, model="transformer", optimizer="adam"))

Each rank is a process of its own (started by spawn, joined over gloo on 127.0.0.1) that builds what dpviz's rank
builds for the same configuration (the catalogue's model from the run's seed, its DistributedSampler shard through
a DataLoader of ceil(batch_size / ranks) rows, the run's optimizer; DDP, ZeroRedundancyOptimizer over DDP, or
fully_shard on dpviz's units and then the root) and trains it with a plain loop: no hooks, no observer, no
spans, no memory ledger. It times each step as dpviz's trace does, from loading the rows to the end of the
optimizer step, and returns every rank's times; `slowest_median` reads them as bench_engines reads a trace.
"""
from __future__ import annotations

import datetime
import gc
import queue
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from dpviz.config import RunConfig  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, engine: str, settings: dict, results) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    from dpviz.engines.ddp.sampler_rows import per_rank_batch
    from dpviz.engines.fsdp.wrapping import shard_units
    from dpviz.engines.workload import tutorial_data as tutorial
    from dpviz.engines.workload.input_forms import first_tensor

    torch.set_num_threads(1)  # as every dpviz rank sets it: two cores, several processes
    gc.freeze()  # as dpviz's forkserver leaves its ranks: torch's objects out of the collector's sight
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
    except Exception as error:  # the port taken meanwhile, say: the caller tries again on another
        results.put((rank, f"{type(error).__name__}: {error}"))
        return
    try:
        config = RunConfig(**settings)
        work = tutorial.workload(config, None)
        model, plain = work.build()
        sampler = DistributedSampler(plain.dataset, num_replicas=world, rank=rank, shuffle=config.shuffle,
                                     seed=config.seed)
        loader = DataLoader(plain.dataset, batch_size=per_rank_batch(config.batch_size, world), sampler=sampler,
                            collate_fn=plain.collate_fn)
        kind, options = tutorial.optimizer_of(config)
        if engine == "fsdp":
            for _, unit in shard_units(model):
                fully_shard(unit, reshard_after_forward=config.reshard_after_forward)
            fully_shard(model, reshard_after_forward=config.reshard_after_forward)
            wrapped, optimizer = model, kind(model.parameters(), **options)
        else:
            wrapped = DistributedDataParallel(model)
            optimizer = (ZeroRedundancyOptimizer(model.parameters(), optimizer_class=kind, **options)
                         if engine == "zero1" else kind(model.parameters(), **options))
        teacher = work.teacher()
        times = []
        iterator = iter(loader)
        for _ in range(len(loader)):
            start = time.perf_counter()
            data, indices = next(iterator)
            args, kwargs = work.call(data, indices.tolist())
            output = wrapped(*args, **kwargs)
            target = work.target(teacher, first_tensor((args, kwargs)), args, kwargs)
            work.loss(output, target).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            times.append(time.perf_counter() - start)
        dist.barrier()
        results.put((rank, times))
    except Exception as error:
        results.put((rank, f"{type(error).__name__}: {error}"))
    finally:
        dist.destroy_process_group()


def bare_steps(engine: str, config: RunConfig) -> list[list[float]]:
    """Every rank's step times (rank by rank) of a plain training run of `engine` on `config`'s settings."""
    context = mp.get_context("spawn")
    results = context.Queue()
    port = _free_port()
    settings = {k: v for k, v in config.to_dict().items()}
    processes = [context.Process(target=_rank, args=(rank, config.gpus, port, engine, settings, results))
                 for rank in range(config.gpus)]
    for process in processes:
        process.start()
    got: dict[int, Any] = {}
    try:
        deadline = time.monotonic() + 600
        while len(got) < len(processes):
            try:
                rank, value = results.get(timeout=1)
                got[rank] = value
            except queue.Empty:
                if time.monotonic() > deadline or any(p.exitcode not in (None, 0) for p in processes):
                    raise RuntimeError(f"bare ranks ended without reporting: exit codes {[p.exitcode for p in processes]}")
            failed = [value for value in got.values() if isinstance(value, str)]
            if failed:
                raise RuntimeError(f"a bare rank failed: {failed[0]}")
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():  # the others of a failed run wait in a collective: end them
                process.kill()
                process.join()
    return [got[rank] for rank in range(config.gpus)]


def bare_steps_retried(engine: str, config: RunConfig, tries: int = 3) -> tuple[list[list[float]], int]:
    """bare_steps, started again (on a new port) if a start fails; with how many starts failed first."""
    for failed in range(tries):
        try:
            return bare_steps(engine, config), failed
        except RuntimeError:
            if failed == tries - 1:
                raise
    raise AssertionError("unreachable")


def slowest_median(steps: list[list[float]]) -> float:
    """The median over steps after the first of the slowest rank's step, in seconds."""
    return statistics.median(max(rank[i] for rank in steps) for i in range(1, min(map(len, steps))))

"""A DDP run under torch's own launcher: this process is one rank, and rank 0 writes the one trace.

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr HOST --master-port 29500 \\
        -m dpviz --engine ddp --train --trace run.json

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node), MASTER_ADDR and
MASTER_PORT; the process group joins through them (env://). Every rank records itself as dpviz's own
ranks do, then the reports are gathered to rank 0 over the process group, which merges them (lanes in
global rank order, named by node and local rank) and returns the trace; the other ranks return None.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from typing import Any, Iterator

from dpviz.config import LIMITS, ConfigError, RunConfig
from dpviz.trace import Trace
from dpviz.engines.processes import delta

ENVIRONMENT = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def under_torchrun() -> bool:
    """Whether this process was started as a rank by torchrun (or anything that sets its variables)."""
    return all(name in os.environ for name in ENVIRONMENT)


def _number(name: str, default: int | None = None) -> int:
    text = os.environ.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(str(text).strip())
    except ValueError:
        raise ConfigError(f"torchrun's {name} should be a whole number, got {str(text)[:40]!r}.") from None


def world_size() -> int:
    return _number("WORLD_SIZE")


def global_rank() -> int:
    """This process's rank in the whole run (0 writes the trace)."""
    return _number("RANK")


def check_world(config: RunConfig, gpus_given: bool) -> RunConfig:
    """`config` with torchrun's world size as its ranks; ConfigError when --gpus says otherwise or
    when the world is larger than dpviz runs."""
    world, rank = world_size(), global_rank()
    low, high = LIMITS["gpus"]
    if not low <= world <= high:
        raise ConfigError(f"torchrun's world size is {world}; dpviz runs {low} to {high} ranks.")
    if not 0 <= rank < world:
        raise ConfigError(f"torchrun's RANK {rank} is outside its world of {world} ranks.")
    if gpus_given and config.gpus != world:
        raise ConfigError(f"--gpus {config.gpus} disagrees with torchrun's world size {world}; "
                          "leave --gpus out or make them equal.")
    return dataclasses.replace(config, gpus=world)


def resolve(config: RunConfig, available: int | None = None) -> RunConfig:
    """`config` with its backend settled for this node: "cuda" (NCCL) needs a GPU for each of torchrun's
    ranks on this machine (LOCAL_WORLD_SIZE); "auto" takes NCCL when there are as many, else gloo."""
    if available is None:
        from dpviz.engines.run import cuda_device_count

        available = cuda_device_count()
    local = _number("LOCAL_WORLD_SIZE", 1)
    if config.backend == "cuda" and available < local:
        raise ConfigError(f"backend cuda runs one process per GPU, so torchrun's {local} rank{'s' if local != 1 else ''} "
                          f"on this machine need {local} CUDA device{'s' if local != 1 else ''}, but it has {available}; "
                          "use backend cpu (gloo) or fewer ranks per node.")
    cuda = config.backend == "cuda" or (config.backend == "auto" and available >= local)
    return dataclasses.replace(config, backend="cuda" if cuda else "cpu")


@contextlib.contextmanager
def _stderr_aside() -> Iterator[None]:
    """While the rank runs, what gloo, c10d and NCCL write from C++ to stderr (a peer's closed connection
    dumps a stack) goes to a file that is thrown away: the rank's error reaches the user as the command
    line's one line, and the trace holds what each rank saw."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as aside:
        os.dup2(aside.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def record_rank(config: RunConfig, timeout_s: float | None = None, workload: Any = None) -> Trace | None:
    """Run this process as its rank of `config` (backend settled by `resolve`); rank 0 returns the
    merged trace, the others None. A collective that waits longer than `timeout_s` (the config's
    timeout_s unless given) ends the run."""
    import torch
    import torch._dynamo  # noqa: F401  DDP's constructor imports it (seconds), which would be timed as its broadcast
    import torch.distributed as dist

    from dpviz.engines.run import cuda_device_count
    from dpviz.engines import ENGINES
    from dpviz.engines.ranks.program import run_rank, setup_timeout

    timeout_s = config.timeout_s if timeout_s is None else timeout_s
    program = ENGINES[config.engine].part("rank_program")  # the engine's hooks in the shared loop
    rank, world, local_rank = global_rank(), world_size(), _number("LOCAL_RANK")
    node = _number("GROUP_RANK", 0)
    cuda = config.backend == "cuda"
    if "OMP_NUM_THREADS" not in os.environ:  # torchrun sets it to 1 for several ranks a node; a lone rank too
        torch.set_num_threads(1)
    launched = time.perf_counter()

    def init() -> None:
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=rank, world_size=world,
                                timeout=delta(setup_timeout(timeout_s)))

    with _stderr_aside():
        try:
            report = run_rank(program, config, rank, world, init, cuda=cuda, local_rank=local_rank, workload=workload,
                              timeout_s=timeout_s)
            report["startup"]["start"] = None  # torchrun started the process: its start is not ours to time
            report["lane"] = f"node {node} rank {local_rank}"
            reports = [None] * world if rank == 0 else None
            dist.gather_object(report, reports, dst=0)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    if rank != 0:
        return None
    gathered = {"ranks": reports, "exit_codes": [], "stopped": [], "timeout_s": timeout_s, "launched": launched}
    trace = program.merge(config, gathered, backend="cuda" if cuda else "cpu", torch_version=torch.__version__,
                     machine_gpus=cuda_device_count(), lane_names=[r["lane"] for r in reports])
    # The user's own module (each process built it from the same --model): its class and parameter counts.
    return trace if workload is None else dataclasses.replace(trace, facts={**trace.facts, **workload.facts()})

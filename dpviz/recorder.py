"""record(config) -> Trace: run the tutorial under DataParallel (real or simulated) and watch it.

The watching is done by dpviz.observer.Observer, which leaves what DataParallel does exactly as it is.
"""
from __future__ import annotations

import time
from typing import Callable

import torch
from torch import nn

from . import tutorial
from .config import ConfigError, RunConfig
from .observer import Observer
from .simulated import SimulatedDataParallel
from .trace import Batch, Lane, Trace

Progress = Callable[[int, int], None]


def cuda_device_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_backend(config: RunConfig, available: int | None = None) -> str:
    """The backend a run of `config` uses: real GPUs when asked for or when `auto` finds enough."""
    available = cuda_device_count() if available is None else available
    if config.backend == "cuda":
        if available < config.gpus:
            raise ConfigError(
                f"backend cuda needs {config.gpus} CUDA device{'s' if config.gpus > 1 else ''} "
                f"but this machine has {available}; use backend simulated or fewer gpus."
            )
        return "cuda"
    if config.backend == "auto" and available >= config.gpus >= 2:
        return "cuda"
    return "simulated"


def _lanes(backend: str, count: int) -> list[Lane]:
    if backend == "cuda":
        return [Lane(i, f"cuda:{i} {torch.cuda.get_device_name(i)}") for i in range(count)]
    return [Lane(i, f"simulated device {i}") for i in range(count)]


def record(config: RunConfig, progress: Progress | None = None) -> Trace:
    """Run the tutorial for `config` and return what happened, batch by batch."""
    backend = resolve_backend(config)
    model, loader = tutorial.build(config)
    device_ids = list(range(config.gpus))
    if backend == "cuda":
        model = model.to("cuda:0")
        parallel: nn.Module = nn.DataParallel(model, device_ids=device_ids)
    else:
        parallel = SimulatedDataParallel(model, device_ids=device_ids)
    if config.train:
        teacher, optimizer = tutorial.training_parts(config, model)
        teacher = teacher.to("cuda:0" if backend == "cuda" else "cpu")
    observer = Observer(parallel, model, cuda=backend == "cuda", t0=time.perf_counter(), train=config.train,
                        memory_batches={0, config.num_batches - 1})
    batches: list[Batch] = []
    total = config.num_batches
    every = max(1, total // 100)
    try:
        for data, indices in loader:
            if backend == "cuda":
                data = data.to("cuda:0")  # as the tutorial does: the batch starts on device 0
            output = parallel(data)
            if config.train:
                with torch.no_grad():
                    target = teacher(data)
                observer.train_step(output, target, optimizer)
            batches.append(Batch(len(batches), indices.tolist(), list(data.shape), list(output.shape)))
            observer.next_batch()
            if progress is not None and (len(batches) % every == 0 or len(batches) == total):
                progress(len(batches), total)
    finally:
        observer.close()
    return Trace(
        config=config,
        backend=backend,
        torch_version=torch.__version__,
        machine_gpus=cuda_device_count(),
        output_device=parallel.output_device,
        lanes=_lanes(backend, config.gpus),
        batches=batches,
        spans=observer.spans,
        memory=observer.memory_samples,
        memory_kind=observer.memory.kind,
    )

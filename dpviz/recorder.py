"""record(config) -> Trace: run the tutorial under DataParallel (real or simulated) and watch it.

The recorder only observes: hooks on the model time each replica, and the DataParallel object's own
scatter / replicate / parallel_apply / gather methods are wrapped on the instance to time each phase.
What DataParallel does is left exactly as it is.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import torch
from torch import nn

from . import tutorial
from .config import ConfigError, RunConfig
from .simulated import SimulatedDataParallel, current_device
from .trace import Batch, Lane, Span, Trace

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


class _Observer:
    """Times the phases and replicas of every DataParallel call made while it is installed."""

    def __init__(self, parallel: nn.Module, model: nn.Module, cuda: bool, t0: float):
        self.parallel, self.cuda, self.t0 = parallel, cuda, t0
        self.device_ids = list(parallel.device_ids)
        self.dim = getattr(parallel, "dim", 0)
        self.batch = 0
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        self.local = threading.local()
        self.finished = 0
        for name in ("scatter", "replicate", "parallel_apply", "gather"):
            setattr(parallel, name, self._timed(name, getattr(parallel, name)))
        self.handles = [
            model.register_forward_pre_hook(self._before_forward),
            model.register_forward_hook(self._after_forward),
        ]

    def now(self, device: int | None = None) -> float:
        if self.cuda:
            torch.cuda.synchronize(device)  # CUDA runs asynchronously: wait for the work to be done
        return time.perf_counter() - self.t0

    def _timed(self, name: str, method: Callable) -> Callable:
        phase = "apply" if name == "parallel_apply" else name

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = self.now()
            result = method(*args, **kwargs)
            self.spans.append(Span(phase=phase, batch=self.batch, start=start, end=self.now()))
            return result

        return timed

    def _device_of(self, inputs: tuple) -> int:
        if self.cuda:
            tensor = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
            return tensor.device.index if tensor is not None else torch.cuda.current_device()
        return current_device()

    def _before_forward(self, module: nn.Module, inputs: tuple) -> None:
        device = self._device_of(inputs)
        self.local.start = self.now(device)
        self.local.device = device

    def _after_forward(self, module: nn.Module, inputs: tuple, output: Any) -> None:
        device = self.local.device
        end = self.now(device)
        with self.lock:
            order, self.finished = self.finished, self.finished + 1
        x = inputs[0] if inputs and isinstance(inputs[0], torch.Tensor) else None
        self.spans.append(
            Span(
                phase="forward", batch=self.batch, start=self.local.start, end=end, lane=device,
                replica=self.device_ids.index(device),
                rows=x.shape[self.dim] if x is not None and x.dim() else 0,
                input_shape=list(x.shape) if x is not None else None,
                output_shape=list(output.shape) if isinstance(output, torch.Tensor) else None,
                thread=threading.current_thread().name, order=order,
            )
        )

    def next_batch(self) -> None:
        self.batch += 1
        self.finished = 0

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _with_row_offsets(spans: list[Span]) -> list[Span]:
    """Give each replica the offset of its slice: replicas hold consecutive slices in replica order."""
    offsets: dict[tuple[int, int], int] = {}
    by_batch: dict[int, list[Span]] = {}
    for span in spans:
        if span.phase == "forward":
            by_batch.setdefault(span.batch, []).append(span)
    for batch, forwards in by_batch.items():
        offset = 0
        for span in sorted(forwards, key=lambda s: s.replica):
            offsets[(batch, span.replica)] = offset
            offset += span.rows
    return [
        Span(**{**span.__dict__, "row_offset": offsets[(span.batch, span.replica)]})
        if span.phase == "forward" else span
        for span in spans
    ]


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
    observer = _Observer(parallel, model, cuda=backend == "cuda", t0=time.perf_counter())
    batches: list[Batch] = []
    total = config.num_batches
    every = max(1, total // 100)
    try:
        for data, indices in loader:
            if backend == "cuda":
                data = data.to("cuda:0")  # as the tutorial does: the batch starts on device 0
            output = parallel(data)
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
        spans=_with_row_offsets(observer.spans),
    )

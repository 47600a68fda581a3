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
import torch.nn.functional as F
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

    def __init__(self, parallel: nn.Module, model: nn.Module, cuda: bool, t0: float, train: bool = False):
        self.parallel, self.cuda, self.t0, self.train = parallel, cuda, t0, train
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
        self.accumulated: list[float] = []  # when each parameter's summed gradient landed in .grad
        self.direct_backward: tuple | None = None
        if train:
            self.handles += [
                p.register_post_accumulate_grad_hook(lambda p: self.accumulated.append(self.now()))
                for p in model.parameters()
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
        replica = self.device_ids.index(device)
        if self.train and isinstance(output, torch.Tensor) and output.requires_grad:
            self._watch_backward(module, replica, device, output)
        self.spans.append(
            Span(
                phase="forward", batch=self.batch, start=self.local.start, end=end, lane=device,
                replica=replica,
                rows=x.shape[self.dim] if x is not None and x.dim() else 0,
                input_shape=list(x.shape) if x is not None else None,
                output_shape=list(output.shape) if isinstance(output, torch.Tensor) else None,
                thread=threading.current_thread().name, order=order,
            )
        )

    def _watch_backward(self, module: nn.Module, replica: int, device: int, output: torch.Tensor) -> None:
        """Time one replica's backward: from its output's gradient arriving (the gather's backward
        scattering it back) to the gradient of its last parameter copy."""
        batch, state = self.batch, {}
        copies = [
            t for m in module.modules() for t in getattr(m, "_former_parameters", {}).values()
            if t is not None and t.requires_grad
        ]
        state["left"] = len(copies)

        def output_grad(grad: torch.Tensor) -> None:
            state["start"], state["shape"] = self.now(device), list(grad.shape)

        def copy_grad(grad: torch.Tensor) -> None:
            state["left"] -= 1
            if state["left"] == 0:
                self._backward_span(batch, replica, device, state, self.now(device))

        output.register_hook(output_grad)
        for copy in copies:
            copy.register_hook(copy_grad)
        if not copies:  # one device: a direct call on the module itself, which ends at its .grad
            self.direct_backward = (batch, replica, device, state)

    def _backward_span(self, batch: int, replica: int, device: int, state: dict, end: float) -> None:
        shape = state.get("shape")
        self.spans.append(Span(
            phase="backward", batch=batch, start=state.get("start", end), end=end, lane=device, replica=replica,
            rows=shape[self.dim] if shape else 0, input_shape=shape, thread=threading.current_thread().name,
        ))

    def train_step(self, output: torch.Tensor, target: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Loss on the output device, backward through DataParallel, the step on device_ids[0]."""
        first, out = self.device_ids[0], self.parallel.output_device
        start = self.now()
        loss = F.mse_loss(output, target.to(output.device))
        self.spans.append(Span(phase="loss", batch=self.batch, start=start, end=self.now(), lane=out))
        optimizer.zero_grad()
        loss.backward()
        if self.direct_backward is not None:
            batch, replica, device, state = self.direct_backward
            self._backward_span(batch, replica, device, state, max(self.accumulated, default=self.now()))
        else:
            # Every replica's gradients are ready once the last backward ends; the sum into the
            # module's own .grad (Broadcast's backward) ends when the last parameter's lands.
            ends = [s.end for s in self.spans if s.phase == "backward" and s.batch == self.batch]
            begin = max(ends, default=start)
            self.spans.append(Span(phase="reduce", batch=self.batch, start=begin,
                                   end=max(self.accumulated + [begin]), lane=first))
        start = self.now()
        optimizer.step()
        self.spans.append(Span(phase="step", batch=self.batch, start=start, end=self.now(), lane=first))

    def next_batch(self) -> None:
        self.batch += 1
        self.finished = 0
        self.accumulated, self.direct_backward = [], None

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _with_row_offsets(spans: list[Span]) -> list[Span]:
    """Give each replica's spans the offset of its slice: replicas hold consecutive slices in replica order."""
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
        if (span.batch, span.replica) in offsets else span
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
    if config.train:
        targets, optimizer = tutorial.training_parts(config, model)
    observer = _Observer(parallel, model, cuda=backend == "cuda", t0=time.perf_counter(), train=config.train)
    batches: list[Batch] = []
    total = config.num_batches
    every = max(1, total // 100)
    try:
        for data, indices in loader:
            if backend == "cuda":
                data = data.to("cuda:0")  # as the tutorial does: the batch starts on device 0
            output = parallel(data)
            if config.train:
                observer.train_step(output, targets[indices], optimizer)
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

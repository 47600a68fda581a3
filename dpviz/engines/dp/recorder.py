"""record(config) -> Trace: run the tutorial under DataParallel (real or simulated) and watch it.

The watching is done by dpviz.engines.dp.observer.Observer, which leaves what DataParallel does exactly as it is.
What DataParallel raises or warns is part of what happened: a failing batch ends the run and is
recorded as the user would see it, warnings are collected with the batch they first came in.
"""
from __future__ import annotations

import re
import time
from typing import Any, Callable

import torch
from torch import nn

from dpviz.engines.workload import input_forms as inputs
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.catalogue import MODEL_SPECS
from dpviz.config import RunConfig
from dpviz.engines.run import cuda_device_count
from dpviz.engines.base import Progress
from dpviz.engines.dp.devices import resolve_backend
from dpviz.engines.dp.observer import Observer
from dpviz.engines.dp.simulated import SimulatedDataParallel
from dpviz.engines.dp.workers import POOL
from dpviz.trace import Batch, Failure, Lane, Trace, WarningNote
from dpviz.engines.workload.precision import autocast
from dpviz.engines.workload.warning_capture import collecting


REPLICA_IN_MESSAGE = re.compile(r"in replica (\d+)")
THREADS_REUSED = "reused"  # facts["threads"] of a simulated run


def _lanes(backend: str, count: int) -> list[Lane]:
    if backend == "cuda":
        return [Lane(i, f"cuda:{i} {torch.cuda.get_device_name(i)}") for i in range(count)]
    return [Lane(i, f"simulated device {i}") for i in range(count)]


class _Warnings:
    """Warnings raised during DataParallel calls, each kept once with its first batch and a count."""

    def __init__(self) -> None:
        self.notes: dict[tuple[str, str], WarningNote] = {}
        self.batch = 0

    def add(self, category: str, message: str) -> None:
        old = self.notes.get((category, message))
        self.notes[(category, message)] = WarningNote(category, message, old.batch if old else self.batch,
                                                      (old.count if old else 0) + 1)


def _short_path(match: re.Match) -> str:
    # A traceback names files by absolute path: keep the part a reader knows (torch/..., dpviz/...),
    # and never show a hosted page's visitors where the server keeps its files.
    path = match.group(1)
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return f'File "{path.split(marker, 1)[1]}"'
    parts = path.replace("\\", "/").split("/")
    return f'File "{"/".join(parts[parts.index("dpviz"):]) if "dpviz" in parts else parts[-1]}"'


def _failure(error: Exception, batch: int, source: bool = True) -> Failure:
    message = re.sub(r'File "([^"]+)"', _short_path, str(error)).rstrip()
    if not source:  # the user's own module: its traceback names files and lines, never quotes their code
        message = _without_source(message)
    found = REPLICA_IN_MESSAGE.search(message.splitlines()[0] if message else "")
    return Failure(batch, type(error).__name__, message, int(found.group(1)) if found else None)


def _without_source(message: str) -> str:
    """A traceback without the source lines under each `File "...", line N, in f` (and their ^^^ markers)."""
    kept, under_file = [], False
    for line in message.splitlines():
        if under_file and line.startswith("    "):
            continue
        under_file = line.lstrip().startswith('File "')
        kept.append(line)
    return "\n".join(kept)


def _shape(output: Any) -> list[int]:
    tensor = inputs.first_tensor(output)
    return list(tensor.shape) if tensor is not None else []


def record(config: RunConfig, progress: Progress | None = None, workload: Any = None) -> Trace:
    """Run the tutorial for `config` (or `workload`, the user's own module and batch: dpviz.engines.workload.own)
    and return what happened, batch by batch."""
    backend = resolve_backend(config)
    work = tutorial.workload(config, workload)
    model, loader = work.build()
    device_ids = list(range(config.gpus))
    device = "cuda:0" if backend == "cuda" else "cpu"
    if backend == "cuda":
        model = model.to(device)
        parallel: nn.Module = nn.DataParallel(model, device_ids=device_ids, dim=config.dim)
    else:
        parallel = SimulatedDataParallel(model, device_ids=device_ids, dim=config.dim)
    if config.train:
        teacher, optimizer = work.training_parts(model)
        teacher = teacher.to(device) if teacher is not None else None
    sampled = {0, config.num_batches - 1}
    facts = work.facts_kind  # what this model shows beyond its outputs
    observer = Observer(parallel, model, cuda=backend == "cuda", t0=time.perf_counter(), train=config.train,
                        memory_batches=sampled, argument_names=work.argument_names)
    batches: list[Batch] = []
    caught, failure, losses = _Warnings(), None, []
    total = config.num_batches
    every = max(1, total // 100)
    try:
        for data, indices in loader:
            data = data.to(device)  # as the tutorial does: the batch starts on device 0
            ids = indices.tolist()
            args, kwargs = work.call(data, ids)
            x = inputs.first_tensor((args, kwargs))  # the batch itself, as the model takes it
            batch = lambda output_shape: Batch(len(batches), ids, list(x.shape), output_shape)
            index = len(batches)
            caught.batch = index
            try:
                # Mixed precision: autocast entered here, in the caller's thread; parallel_apply enters it again in
                # each replica's thread (autocast is thread-local), as torch's does.
                with collecting(caught.add, observer.threads), autocast(config, "cpu"):
                    output = parallel(*args, **kwargs)
            except Exception as error:  # what the user's loop would die of: record it and stop
                observer.failed()
                failure = _failure(error, index, source=not work.facts())
                batches.append(batch([]))
                observer.next_batch()
                break
            if facts == "losses" and index in sampled:
                losses.append(_losses(observer, model, args, kwargs, output, index))
            if config.train:
                try:
                    target = work.target(teacher, x, args, kwargs)
                    _train_step(observer, output, lambda out: _cast_loss(config, work, out, target), optimizer)
                except Exception as error:  # a user's loss or backward that fails: what their loop would die of
                    failure = _failure(error, index, source=not work.facts())
                    batches.append(batch(_shape(output)))
                    observer.next_batch()
                    break
            batches.append(batch(_shape(output)))
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
        arguments=observer.arguments,
        failure=failure,
        warnings=list(caught.notes.values()),
        facts={**_facts(config, model, batches, losses, simulated=backend != "cuda"), **work.facts()},
    )


def _train_step(observer: Observer, output: torch.Tensor, loss_of: Callable[[torch.Tensor], torch.Tensor],
                optimizer: torch.optim.Optimizer) -> None:
    """Loss on the output device, backward through DataParallel, the step on device_ids[0]: the
    training loop's own work, with the observer told when each part begins and ends."""
    start = observer.now()
    loss = loss_of(output)
    observer.loss_computed(start, loss)
    optimizer.zero_grad()
    observer.backward_starts(output)
    loss.backward()
    observer.backward_ended()
    start = observer.now()
    optimizer.step()
    observer.stepped(start, optimizer)


def _cast_loss(config: RunConfig, work: Any, output: Any, target: Any) -> torch.Tensor:
    """The loss under autocast when the run is mixed, as torch's recipe computes it (backward runs outside)."""
    with autocast(config, "cpu"):
        return work.loss(output, target)


def _losses(observer: Observer, model: nn.Module, args: tuple, kwargs: dict, output: torch.Tensor, batch: int) -> dict:
    """For a model that returns its loss: what DataParallel gathered against the loss of the whole
    batch on one device (computed here with the observer paused, so it is not a replica)."""
    observer.paused = True
    try:
        with torch.no_grad():
            whole = float(model(*args, **kwargs))
    finally:
        observer.paused = False
    gathered = output.detach().reshape(-1).tolist()
    rows = observer.forward_rows()
    return {"batch": batch, "gathered": gathered, "chunk_rows": rows, "whole": whole}


def _facts(config: RunConfig, model: nn.Module, batches: list[Batch], losses: list[dict],
           simulated: bool) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    if simulated:
        # The simulated replicas ran on threads borrowed from a pool and reused from call to call
        # (dpviz.engines.dp.workers); real DataParallel starts and joins a thread per replica per call.
        facts["threads"] = THREADS_REUSED
        # ...and at most one per core at once: replicas beyond that took turns on them (workers.py says why).
        facts["threads_at_once"] = POOL.at_once(config.gpus)
    if losses:
        facts["losses"] = losses
    core = getattr(model, "core", model)
    if MODEL_SPECS[config.model].facts == "state":
        # What the model's own state says after the run, against what one device would have counted
        # over the same batches (a failing batch included: its replica 0 may have counted already).
        facts["state"] = {
            "calls": [int(core.calls), len(batches)],
            "rows_seen": [int(core.rows_seen), sum(b.rows for b in batches)],
        }
    return facts

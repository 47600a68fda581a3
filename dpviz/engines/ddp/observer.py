"""RankObserver: what one rank saw of its DistributedDataParallel run, written down without changing it.

It wraps three of the DDP object's own methods on the instance (`_pre_forward`, where DDP rebuilds its
buckets once and broadcasts rank 0's buffers; `_sync_buffers`, that broadcast; `_run_ddp_forward`, the
module's forward) to time them, and registers a communication hook that calls DDP's default all-reduce
hook (torch.distributed.algorithms.ddp_comm_hooks.default_hooks.allreduce_hook) unchanged, timing when
each bucket's all-reduce is launched and when its future completes. Times are this process's
`time.perf_counter()`; the launcher puts every rank's on one axis.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from dpviz.engines.workload.counted_once import LeafOutputs
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.engines.workload.memory import module_bytes, nbytes

# A span as it travels back to the launcher: plain values only (it is pickled through a queue).
# (phase, step, start, end, row_offset, rows, input_shape, output_shape, thread, group: DDP's bucket, FSDP's module)
RawSpan = tuple


class RankObserver:
    """Spans, bucket layouts and a memory ledger of one rank."""

    def __init__(self, rank: int, ddp: torch.nn.parallel.DistributedDataParallel, cuda: bool,
                 memory_steps: set[int], thread_name: str, dim: int = 0):
        self._keep_records(rank, ddp, cuda, memory_steps, thread_name, dim)
        self.names = {id(p): name for name, p in ddp.module.named_parameters()}
        self.held: dict[str, int] = {}
        self.held["parameters"] = module_bytes(ddp.module)
        self._wrap("_pre_forward", self._timed_pre_forward)
        self._wrap("_sync_buffers", self._timed("buffers"))
        self._wrap("_run_ddp_forward", self._timed_forward)
        ddp.register_comm_hook(self, _recording_allreduce)
        self.watch_activations(ddp.module)

    def _keep_records(self, rank: int, ddp: Any, cuda: bool, memory_steps: set[int], thread_name: str,
                      dim: int) -> None:
        """What every rank's observer records into, whether a DDP object runs its rank (`ddp`) or none does (FSDP's,
        tensor parallelism's): its spans, bucket layouts, memory samples and the bytes handed to each collective."""
        self.rank, self.ddp, self.cuda, self.dim = rank, ddp, cuda, dim
        self.step = 0
        self.spans: list[RawSpan] = []
        self.lock = threading.Lock()  # the all-reduce futures complete on the backend's own threads
        self.layouts: list[tuple[int, list[tuple[int, list[str], int]]]] = []  # (first step, buckets) when it changes
        self._step_buckets: dict[int, tuple[list[str], int]] = {}
        self.thread_name = thread_name  # what runs the collectives: "gloo" or "NCCL"
        self.memory_steps, self.memory_samples = memory_steps, []
        self.moved: dict[tuple[int, str], list[int]] = {}  # (step, collective) -> [calls, bytes handed to it]

    # ---- steps
    @property
    def step(self) -> int:
        return self._step

    @step.setter
    def step(self, value: int) -> None:
        self._step = value
        if hasattr(self, "activations"):  # set while constructing, before there is anything to watch
            self._watch(value in self.memory_steps)

    def watch_activations(self, module: torch.nn.Module) -> None:
        """Sum `module`'s leaves' outputs into the ledger in the steps whose memory is kept, and only then: a
        forward hook sends every call of its module down nn.Module's slower path, every step."""
        self.leaves = [m for m in module.modules() if not list(m.children())]
        self.leaf_outputs = LeafOutputs()  # each storage once; forward's own output moved to "output and loss"
        self.activations: list = []
        self._watch(self.step in self.memory_steps)

    def _watch(self, on: bool) -> None:
        if on and not self.activations:
            self.activations = [m.register_forward_hook(self._activation) for m in self.leaves]
        elif not on and self.activations:
            for handle in self.activations:
                handle.remove()
            self.activations = []

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()  # CUDA runs asynchronously: wait for the work to be done
        return time.perf_counter()

    # ---- spans
    def add(self, phase: str, start: float, end: float, rows: tuple[int, int] = (0, 0), shapes=(None, None),
            thread: str | None = None, group: int | None = None) -> None:
        with self.lock:
            self.spans.append((phase, self.step, start, end, rows[0], rows[1], shapes[0], shapes[1], thread, group))

    def _wrap(self, name: str, make) -> None:
        setattr(self.ddp, name, make(getattr(self.ddp, name)))

    def _timed(self, phase: str):
        def wrap(method):
            def timed(*args: Any, **kwargs: Any) -> Any:
                start = self.now()
                try:
                    return method(*args, **kwargs)
                finally:
                    self.add(phase, start, self.now())
            return timed
        return wrap

    def _timed_pre_forward(self, method):
        def timed(*args: Any, **kwargs: Any) -> Any:
            rebuilt_before, start = self.ddp._has_rebuilt_buckets, self.now()
            result = method(*args, **kwargs)
            if self.ddp._has_rebuilt_buckets and not rebuilt_before:  # DDP sets it when _rebuild_buckets ran
                buffers = [s for s in self.spans if s[0] == "buffers" and s[1] == self.step and s[2] >= start]
                self.add("rebuild", start, buffers[0][2] if buffers else self.now())
            return result
        return timed

    def _timed_forward(self, method):
        """The module's own forward on this rank's rows; a forward that raised still took its time."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            x = first_tensor((args, kwargs))
            in_shape = list(x.shape) if x is not None else []
            rows = in_shape[self.dim] if len(in_shape) > self.dim else 0
            start, output, raised = self.now(), None, True
            try:
                output = method(*args, **kwargs)
                raised = False
                return output
            finally:  # a forward that raised has no output shape (None), unlike a 0-dim loss ([])
                y = first_tensor(output)
                shape = None if raised else list(y.shape) if y is not None else []
                self.add("forward", start, self.now(), (0, rows), (in_shape, shape))
        return timed

    # ---- collectives
    def passed(self, collective: str, size: int, calls: int = 1) -> None:
        """Write down that this rank handed `size` bytes of tensors to `collective` (`calls` calls) in this step."""
        with self.lock:
            kept = self.moved.setdefault((self.step, collective), [0, 0])
            kept[0] += calls
            kept[1] += size

    def moved_rows(self) -> list[list]:
        """[step, collective, calls, bytes] for every collective of every step, steps in order: plain data."""
        return [[step, collective, calls, size] for (step, collective), (calls, size) in sorted(self.moved.items())]

    # ---- buckets
    def allreduce_started(self, bucket: dist.GradBucket) -> float:
        names = [self.names.get(id(p), "?") for p in bucket.parameters()]
        size = bucket.buffer().numel() * bucket.buffer().element_size()
        with self.lock:
            self._step_buckets[bucket.index()] = (names, size)
        self.passed("all-reduce", size)  # the bucket's flat buffer is what the all-reduce is given
        return self.now()

    def step_ended(self) -> None:
        """Keep this step's bucket layout when it differs from the last one kept (construction, rebuild)."""
        if self._step_buckets:
            layout = [(i, *self._step_buckets[i]) for i in sorted(self._step_buckets)]
            if not self.layouts or self.layouts[-1][1] != layout:
                self.layouts.append((self.step, layout))
            self._step_buckets = {}
        self.drop("rows loaded", "activations", "output and loss")
        if hasattr(self, "leaf_outputs"):
            self.leaf_outputs.clear()

    # ---- memory (computed on CPU from tensor sizes; measured on CUDA)
    def hold(self, category: str, size: int) -> None:
        self.held[category] = self.held.get(category, 0) + size

    def set(self, category: str, size: int) -> None:
        self.held[category] = size

    def drop(self, *categories: str) -> None:
        for category in categories:
            self.held.pop(category, None)

    def _activation(self, module, inputs, output) -> None:
        self.hold("activations", self.leaf_outputs.add(output))

    def returned(self, output: Any) -> None:
        """What forward returned, held as "output and loss" (what a class reads there: the output, then the loss);
        the last leaf's output is most often that very tensor, so it leaves the activations: counted once."""
        moved = self.leaf_outputs.take(output) if hasattr(self, "leaf_outputs") else 0
        if moved:
            self.set("activations", self.held.get("activations", 0) - moved)
        self.hold("output and loss", nbytes(output))

    def snapshot(self, phase: str) -> None:
        if self.step not in self.memory_steps:
            return
        self.memory_samples += [(self.step, phase, c, b) for c, b in self.holding()]

    def holding(self) -> list[tuple[str, int]]:
        """What this rank holds now, by kind (computed), or as torch.cuda.memory_allocated measures it."""
        if self.cuda:
            torch.cuda.synchronize()
            return [("allocated", torch.cuda.memory_allocated())]
        return [(c, b) for c, b in self.held.items() if b]

    def facts(self) -> dict:
        """What this rank adds to the trace's facts, key by key (the trace keeps a list per key, one per rank):
        nothing under DDP, whose buckets have their own key."""
        return {}

    def close(self) -> None:
        self._watch(False)


def _recording_allreduce(state, bucket):
    """DDP's default all-reduce hook, timed: launched now, done when its future completes.

    The parameter must be called `bucket`, and carry no annotation but the real dist.GradBucket: DDP
    checks the hook's signature (and this module's annotations are strings)."""
    start = state.allreduce_started(bucket)
    index, step = bucket.index(), state.step

    def done(future: torch.futures.Future) -> torch.Tensor:
        with state.lock:
            state.spans.append(("allreduce", step, start, time.perf_counter(), 0, 0, None, None,
                                state.thread_name, index))
        return future.value()

    return default_hooks.allreduce_hook(None, bucket).then(done)

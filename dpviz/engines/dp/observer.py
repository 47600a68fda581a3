"""Observer: watches DataParallel calls without changing them, and writes down what it sees.

Hooks on the model time each replica (they fire in every replica, since replicas share the module's
hook dicts), the DataParallel object's own scatter / replicate / parallel_apply / gather methods are
wrapped on the instance to time each phase, and gradient hooks time each replica's backward. A
memory ledger (dpviz.engines.workload.memory) follows what each device holds after each phase of chosen batches.
"""
from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from typing import Any, Callable

import torch
from torch import nn

from dpviz.engines.workload.input_forms import describe, first_tensor
from dpviz.engines.dp.ledger import ComputedMemory, MeasuredMemory
from dpviz.engines.workload.memory import module_bytes, nbytes, stored_bytes
from dpviz.engines.dp.simulated import current_device
from dpviz.engines.dp.vocabulary import VOCABULARY
from dpviz.trace import ArgumentSample, Span

TRANSIENT = tuple(k.name for k in VOCABULARY.memory_kinds if k.transient)  # freed when a batch ends


class Observer:
    """Times the phases and replicas of every DataParallel call made while it is installed."""

    def __init__(self, parallel: nn.Module, model: nn.Module, cuda: bool, t0: float, train: bool = False,
                 memory_batches: set[int] = frozenset(), argument_names: tuple[str, ...] = ("x",)):
        self.parallel, self.model, self.cuda, self.t0, self.train = parallel, model, cuda, t0, train
        self.device_ids = list(parallel.device_ids)
        self.dim = getattr(parallel, "dim", 0)
        self.batch = 0
        self.sampled = 0 in memory_batches  # this batch's memory is sampled: see `sampled` in next_batch
        self.spans: list[Span] = []  # finished batches' spans
        # This batch's spans, until their row offsets are known; a replica's forward waits here as its
        # Span's fields but the row offset (a tuple: building a Span once, not twice, is a run's largest cost).
        self.pending: list[Span | tuple] = []
        self.shapes: dict[tuple, list[int]] = {}  # one list per distinct shape: a run repeats a few
        self.lock = threading.Lock()  # for the memory ledger, which replicas' threads add to at once
        # The replica hooks take no lock: each replica writes its own key of `started`, and a dict's
        # item assignment and pop, a set's add, a list's append and next() on a count are each atomic
        # under CPython's interpreter lock (a free-threaded build would need the lock back).
        self.finished = itertools.count()  # the order in which this batch's replicas end
        self.started: dict[int, tuple] = {}  # replicas whose forward has not ended: (start, device, x, thread)
        self.call_failed = False  # this batch's DataParallel call raised
        self.paused = False  # set while dpviz itself calls the model (not a DataParallel call)
        self.argument_names = argument_names
        self.arguments: list[ArgumentSample] = []  # what replicas received, for the memory batches
        self.pending_arguments: tuple | None = None  # this batch's scatter: (inputs, kwargs, result)
        self.threads: set[threading.Thread] = set()  # the threads that ran this batch's replicas
        for name in ("scatter", "replicate", "parallel_apply", "gather"):
            setattr(parallel, name, self._timed(name, getattr(parallel, name)))
        self.first, self.output_device = self.device_ids[0], parallel.output_device
        self.memory = MeasuredMemory(self.device_ids) if cuda else ComputedMemory(self.device_ids)
        self.memory.hold(self.first, "parameters", module_bytes(model))
        self.memory_batches, self.memory_samples = memory_batches, []
        if getattr(parallel, "simulated", False) and len(self.device_ids) > 1:
            # The simulation makes each replica's call through `_replica`: no forward hook on the model, whose
            # replicas would each take nn.Module's slower path for it. A direct call (one device) is hooked.
            parallel.replica_watch = self._replica
            self.handles = []
        else:
            self.handles = [
                model.register_forward_pre_hook(self._before_forward, with_kwargs=True),
                model.register_forward_hook(self._after_forward, with_kwargs=True),
            ]
        self.activation_handles: list = []  # hooks on the model's leaves, while a sampled batch runs
        self._watch_activations(self.sampled)
        self.accumulated: list[float] = []  # when each parameter's summed gradient landed in .grad
        self.direct_backward: tuple | None = None
        if train:
            self.handles += [
                p.register_post_accumulate_grad_hook(lambda p: self.accumulated.append(self.now()))
                for p in model.parameters() if p.requires_grad  # not a frozen part (the loss model's teacher)
            ]

    def now(self, device: int | None = None) -> float:
        if self.cuda:
            torch.cuda.synchronize(device)  # CUDA runs asynchronously: wait for the work to be done
        return time.perf_counter() - self.t0

    def _timed(self, name: str, method: Callable) -> Callable:
        phase = "apply" if name == "parallel_apply" else name

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = self.now()
            if phase == "scatter" and self.sampled:  # the batch as the caller passed it, on device_ids[0]
                self.memory.hold(self.first, "batch and chunks", nbytes(args[:2]))
            try:
                result = method(*args, **kwargs)
            finally:  # a phase that raised still took its time, and the timeline shows where it stopped
                self.pending.append(Span(phase=phase, batch=self.batch, start=start, end=self.now()))
            if phase == "scatter":  # described at the batch's end, and only if it is kept
                self.pending_arguments = (args[0], args[1] or {}, result)
            if self.sampled:
                self._account(phase, result)
            return result

        return timed

    def _arguments(self, inputs: tuple, kwargs: dict, scattered: tuple) -> list[ArgumentSample]:
        """What scatter gave each replica of each argument."""
        pieces, kwarg_pieces = scattered
        return [
            ArgumentSample(self.batch, i, self.device_ids[i], a.path, a.kind, a.shape, a.mode)
            for i, (piece, kwarg_piece) in enumerate(zip(pieces, kwarg_pieces))
            if i < len(self.device_ids)
            for a in describe(inputs, kwargs, piece, kwarg_piece, self.argument_names)
        ]

    def _account(self, phase: str, result: Any) -> None:
        """Enter what a phase left on each device into the ledger, then take a snapshot."""
        if phase == "scatter":  # chunk 0 stays where the batch is; the others are copies
            inputs, kwargs = result
            for i, piece in enumerate(zip(inputs, kwargs)):
                if i > 0:
                    self.memory.hold(self.device_ids[i], "batch and chunks", nbytes(piece))
        elif phase == "replicate":  # device 0's replica shares the module's own parameters
            for i, replica in enumerate(result[1:], start=1):
                self.memory.hold(self.device_ids[i], "parameter copies", module_bytes(replica))
        elif phase == "gather":
            self.memory.hold(self.output_device, "output and loss", nbytes(result))
        self._snapshot(phase)

    def _snapshot(self, phase: str) -> None:
        if self.batch in self.memory_batches:
            if self.cuda:
                torch.cuda.synchronize()
            self.memory_samples += self.memory.snapshot(self.batch, phase)

    def _watch_activations(self, on: bool) -> None:
        """Hook the model's leaf modules for the sampled batches only: the hook sums activation sizes,
        which only those batches keep, and any hook sends every call of its module, in every replica,
        down nn.Module's slower path."""
        if on and not self.activation_handles:
            self.activation_handles = [m.register_forward_hook(self._activation)
                                       for m in self.model.modules() if not list(m.children())]
        elif not on:
            for handle in self.activation_handles:
                handle.remove()
            self.activation_handles = []

    def _activation(self, module: nn.Module, inputs: tuple, output: Any) -> None:
        if self.paused or not self.sampled:
            return
        device = output.device.index if self.cuda and isinstance(output, torch.Tensor) else current_device()
        with self.lock:
            self.memory.hold(device, "activations", nbytes(output))

    def _device_of(self, tensor: torch.Tensor | None) -> int:
        if self.cuda:
            return tensor.device.index if tensor is not None else torch.cuda.current_device()
        return current_device()

    def _before_forward(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        if self.paused:
            return
        thread = threading.current_thread()
        self.threads.add(thread)  # a replica thread of this call: its warnings are ours
        # The replica's rows: its first tensor (the batch's chunk) along DataParallel's dim.
        x = args[0] if args and isinstance(args[0], torch.Tensor) else first_tensor((args, kwargs))
        device = self._device_of(x)
        self.started[self.device_ids.index(device)] = (self.now(device), device, x, thread)

    def _replica(self, replica: int, device: int, module: nn.Module, args: tuple, kwargs: dict) -> Any:
        """One simulated replica's call, timed as the two hooks time it (SimulatedDataParallel's watch)."""
        thread = threading.current_thread()
        self.threads.add(thread)
        x = args[0] if args and isinstance(args[0], torch.Tensor) else first_tensor((args, kwargs))
        # now() and _ended()'s work written out (no CUDA to wait for, never a direct call): a replica of a small
        # model does little more than this around its forward, sixteen times a batch.
        clock, t0 = time.perf_counter, self.t0
        start = clock() - t0
        self.started[replica] = (start, device, x, thread)
        output = module(*args, **kwargs)  # a replica that raises stays in `started`: failed() ends its span
        end = clock() - t0
        order = next(self.finished)
        del self.started[replica]
        if self.train and isinstance(output, torch.Tensor) and output.requires_grad:
            self._watch_backward(module, replica, device, output, self._rows(x))
        self.pending.append(self._forward_span(replica, device, start, end, x, output, order, thread.name))
        return output

    def _after_forward(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if self.paused:
            return
        # The replica's thread marks its device (a CUDA device, or the simulated one): the chunk the
        # pre-hook found need not be looked for again.
        device = self._device_of(first_tensor((args, kwargs))) if self.cuda else current_device()
        end = self.now(device)
        self._ended(module, self.device_ids.index(device), device, end, output)

    def _ended(self, module: nn.Module, replica: int, device: int, end: float, output: Any) -> None:
        order = next(self.finished)
        start, _, x, thread = self.started.pop(replica)
        if self.train and isinstance(output, torch.Tensor) and output.requires_grad:
            self._watch_backward(module, replica, device, output, self._rows(x))
        if len(self.device_ids) == 1:  # a direct call: no apply phase to take the snapshot after
            self._snapshot("forward")
        self.pending.append(self._forward_span(replica, device, start, end, x, output, order, thread.name))

    def _rows(self, x: torch.Tensor | None) -> int:
        return x.shape[self.dim] if x is not None and x.dim() > self.dim else 0

    def _forward_span(self, replica: int, device: int, start: float, end: float, x: torch.Tensor | None,
                      output: Any, order: int | None, thread: str | None) -> tuple:
        """A forward Span's fields in order, without its row_offset (see _with_row_offsets)."""
        out = first_tensor(output)  # a tuple or dict output: its first tensor, as the batch's shape is read (and DDP's)
        return ("forward", self.batch, start, end, device, replica, self._rows(x),
                self._shape(x.shape) if x is not None else None,
                self._shape(out.shape) if out is not None else None, thread, order)

    def forward_rows(self) -> list[int]:
        """Rows of this batch's replicas that ran, in replica order."""
        return [f[6] for f in sorted((f for f in self.pending if type(f) is tuple), key=lambda f: f[5])]

    def failed(self) -> None:
        """The DataParallel call of this batch raised: the replicas that started and never ended get
        a forward span with no output, ending now."""
        end = self.now()
        for replica, (start, device, x, _) in sorted(self.started.items()):
            self.pending.append(self._forward_span(replica, device, start, end, x, None, None, None))
        self.started = {}
        self.call_failed = True

    def _watch_backward(self, module: nn.Module, replica: int, device: int, output: torch.Tensor, rows: int) -> None:
        """Time one replica's backward: from its output's gradient arriving (the gather's backward
        scattering it back) to the gradient of its last parameter copy."""
        batch, state, sampled = self.batch, {"rows": rows}, self.sampled
        copies = [
            t for m in module.modules() for t in getattr(m, "_former_parameters", {}).values()
            if t is not None and t.requires_grad
        ]
        state["left"] = len(copies)

        def output_grad(grad: torch.Tensor) -> None:
            state["start"], state["shape"] = self.now(device), grad.shape
            if replica > 0 and sampled:  # the gather's backward copies each replica its slice of the gradient
                with self.lock:
                    self.memory.hold(device, "backward buffers", nbytes(grad))

        def copy_grad(grad: torch.Tensor) -> None:
            if sampled:
                with self.lock:
                    self.memory.hold(device, "backward buffers", nbytes(grad))
            state["left"] -= 1
            if state["left"] == 0:
                self._backward_span(batch, replica, device, state, self.now(device))

        output.register_hook(output_grad)
        for copy in copies:
            copy.register_hook(copy_grad)
        if not copies:  # one device: a direct call on the module itself, which ends at its .grad
            self.direct_backward = (batch, replica, device, state)

    def _shape(self, shape: torch.Size) -> list[int]:
        found = self.shapes.get(shape)  # a torch.Size hashes and compares as the tuple it is
        return found if found is not None else self.shapes.setdefault(tuple(shape), list(shape))

    def _backward_span(self, batch: int, replica: int, device: int, state: dict, end: float) -> None:
        shape = state.get("shape")
        shape = self._shape(shape) if shape is not None else None
        self.pending.append(Span(
            phase="backward", batch=batch, start=state.get("start", end), end=end, lane=device, replica=replica,
            # A 0-dim output (a model returning its loss) gets a 0-dim gradient for all of its rows.
            rows=shape[self.dim] if shape and len(shape) > self.dim else state["rows"], input_shape=shape, thread=threading.current_thread().name,
        ))

    def loss_computed(self, start: float, loss: torch.Tensor) -> None:
        """The loop computed the loss (from `start` until now) on the output device: read before the loop's
        zero_grad, so the last step's gradients are still there, as every engine's ledger reads its loss."""
        out = self.parallel.output_device
        self.pending.append(Span(phase="loss", batch=self.batch, start=start, end=self.now(), lane=out))
        self.loss_start = start
        if self.sampled:
            self.memory.hold(out, "output and loss", nbytes(loss))
            self._snapshot("loss")

    def backward_starts(self, output: Any) -> None:
        """The loop zeroed the gradients and is about to call loss.backward()."""
        self.memory.drop("gradients")  # zero_grad sets every .grad to None
        if self.sampled:  # the loss's gradient w.r.t. the output
            self.memory.hold(self.parallel.output_device, "backward buffers", nbytes(output))

    def backward_ended(self) -> None:
        """loss.backward() returned: every replica's gradients were made and summed into .grad."""
        first = self.device_ids[0]
        self._snapshot("backward")  # every replica's gradients exist, none summed yet: the peak
        self.memory.drop("parameter copies", "activations", "backward buffers")
        for lane in self.device_ids[1:]:
            self.memory.drop_lane(lane, "batch and chunks")
        # Each storage once: on GPUs the summed gradients are views of reduce_add_coalesced's flat buffers.
        self.memory.hold(first, "gradients", stored_bytes([p.grad for p in self.model.parameters() if p.grad is not None]))
        if self.direct_backward is not None:
            batch, replica, device, state = self.direct_backward
            self._backward_span(batch, replica, device, state, max(self.accumulated, default=self.now()))
        else:
            # Every replica's gradients are ready once the last backward ends; the sum into the
            # module's own .grad (Broadcast's backward) ends when the last parameter's lands.
            ends = [s.end for s in self.pending if type(s) is Span and s.phase == "backward"]
            begin = max(ends, default=self.loss_start)
            self.pending.append(Span(phase="reduce", batch=self.batch, start=begin,
                                     end=max(self.accumulated + [begin]), lane=first))
            self._snapshot("reduce")

    def stepped(self, start: float, optimizer: torch.optim.Optimizer) -> None:
        """The loop ran optimizer.step() from `start` until now, on device_ids[0]."""
        first = self.device_ids[0]
        self.pending.append(Span(phase="step", batch=self.batch, start=start, end=self.now(), lane=first))
        self.memory.drop("optimizer state")
        # Its buffers per element of a parameter (SGD's momentum, Adam's two moments), as a rank's held state and its
        # ledger count them: Adam's step counters, one number per parameter tensor, left out.
        self.memory.hold(first, "optimizer state", stored_bytes([s for state in optimizer.state.values()
                                                                 for s in state.values()
                                                                 if isinstance(s, torch.Tensor) and s.dim() > 0]))
        self._snapshot("step")

    def next_batch(self) -> None:
        self.spans += _with_row_offsets(self.pending)
        if self.pending_arguments and (self.batch in self.memory_batches or self.call_failed):
            self.arguments += self._arguments(*self.pending_arguments)
        self.pending, self.pending_arguments, self.call_failed = [], None, False
        self.threads = set()
        self.memory.drop(*TRANSIENT)  # the loop's next iteration frees the last batch's graph
        self.batch += 1
        # Transient memory (a batch's chunks, copies, activations, buffers) is dropped when its batch ends,
        # so only the sampled batches' is ever seen: the others' is not added up at all.
        self.sampled = self.batch in self.memory_batches
        self._watch_activations(self.sampled)
        self.finished = itertools.count()
        self.accumulated, self.direct_backward = [], None

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        if getattr(self.parallel, "replica_watch", None) == self._replica:
            self.parallel.replica_watch = None
        self._watch_activations(False)


def _with_row_offsets(pending: list[Span | tuple]) -> list[Span]:
    """One batch's spans, each replica's with the offset of its slice: replicas hold consecutive
    slices of the batch in replica order. Forwards come as their Span's fields (_forward_span)."""
    offsets, offset = {}, 0
    for fields in sorted((f for f in pending if type(f) is tuple), key=lambda f: f[5]):
        offsets[fields[5]] = offset
        offset += fields[6]
    return [
        Span(*p[:6], offsets[p[5]], *p[6:]) if type(p) is tuple
        else dataclasses.replace(p, row_offset=offsets[p.replica]) if p.replica in offsets else p
        for p in pending
    ]

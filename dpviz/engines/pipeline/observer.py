"""StageObserver: what one pipeline stage saw of its schedule's step, written down without changing it.

It wraps the PipelineStage's own methods on the instance: `forward_one_chunk` and `backward_one_chunk` (one
microbatch's forward and backward, each timed as a span naming its microbatch), and the four that post its
point-to-point operations (`get_fwd_recv_ops`, `get_fwd_send_ops`, `get_bwd_recv_ops`, `get_bwd_send_ops`): a
receive is timed from its posting to the compute that needed it (the schedule waits for it in between), a send
is marked when posted (the schedule fires it then or fuses it with the next receive) and its tensors' bytes are
written down. The loss function the schedule calls on the last stage is timed too. The schedule itself, its
order and its waits are torch's. Times are this process's `time.perf_counter()`; beside each forward, backward and
loss on the CPU, the CPU time its thread spent in it (`time.thread_time()`), which a wait for one of the machine's
cores does not count: what the pass itself cost, as if the stage had a device of its own (read/bubble.py replays the
step from it). On a GPU the wall clock already is the stage's own device's, and no CPU time is kept.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from dpviz.engines.ddp.observer import RankObserver
from dpviz.engines.dp.workers import cores
from dpviz.engines.workload.input_forms import first_tensor
from dpviz.engines.workload.memory import nbytes

# The phases of a stage's point-to-point operations, by the PipelineStage method that posts them. A send is what
# one stage hands the next (activations, a microbatch's forward) or the one before (gradients, its backward).
SENDS = {"get_fwd_send_ops": "send_activations", "get_bwd_send_ops": "send_gradients"}
RECEIVES = {"get_fwd_recv_ops": "receive_activations", "get_bwd_recv_ops": "receive_gradients"}
WAITED_BY = {"receive_activations": "forward", "receive_gradients": "backward"}  # the compute each receive feeds


class StageObserver(RankObserver):
    """Spans (each naming its microbatch) and a memory ledger of one stage: DDP's observer's ledger, its own spans."""

    def __init__(self, rank: int, stage: Any, module: torch.nn.Module, cuda: bool, memory_steps: set[int],
                 last: bool, rows: int):
        # Not RankObserver.__init__: there is no DDP object to time, no buckets.
        # A microbatch's rows: torch cuts the batch's first dim into equal chunks (a later stage's activations may hold
        # its rows on another dim: a user's layer that moves them)
        # Activations are followed in the second step too, the one the views open on (the first also agrees the
        # shapes); the ledger is sampled in the first and the last, as every engine's is. No collective runs a stage:
        # it sends to its neighbours, so no thread of a backend's names its collectives.
        self._keep_records(rank, None, cuda, memory_steps | {1}, "", 0)
        self.last, self.rows, self.sampled = last, rows, memory_steps
        self.held = {"parameters": nbytes(list(module.parameters())) + nbytes(list(module.buffers()))}
        self.flight: list[list] = []  # [step, "forward" | "backward", microbatch, activation bytes, microbatches held]
        self._in_flight: dict[int, int] = {}  # microbatch -> the activation bytes its forward left for its backward
        self._posted: dict[str, tuple[int, float, str]] = {}  # compute -> (microbatch, when its receive was posted, phase)
        self._peak: dict[str, int] | None = None  # the ledger when the most activations were held in this step
        self._labels: float | None = None  # the last stage: when its rows for the targets began to load
        self._forwarded = -1  # the microbatch whose forward ran last: the one whose loss comes next
        self._received: list[int] = []  # the shape of the activations this stage last received
        self._out_shape: list[int] = []  # what its forward gives (and its backward receives the gradient of)
        self._loss_shape: list[int] = []
        self.sent: dict[tuple[int, str], list[int]] = {}  # (step, phase) -> [sends, bytes]
        self.cpu: list[list] = []  # [step, "forward" | "backward" | "loss", microbatch, the thread's CPU seconds in it]
        stage.forward_one_chunk = self._compute(stage.forward_one_chunk, "forward")
        stage.backward_one_chunk = self._compute(stage.backward_one_chunk, "backward")
        for name, phase in {**SENDS, **RECEIVES}.items():
            setattr(stage, name, self._posting(getattr(stage, name), phase))
        if hasattr(stage, "_forward_metadata_inference"):
            stage._forward_metadata_inference = self._unseen(stage._forward_metadata_inference, module)
        self.layers = list(getattr(module, "names", []))
        self.watch_activations(module)

    # ---- spans
    def add(self, phase: str, start: float, end: float, rows: tuple[int, int] = (0, 0), shapes=(None, None),
            thread: str | None = None, group: int | None = None, microbatch: int | None = None) -> None:
        if phase == "load" and self.last and self.rank != 0:
            self._labels = start  # the last stage's rows are its labels' source: timed with the targets made of them
            return
        if phase == "load":
            rows = (0, 0)  # the first stage loads the step's whole batch: a plain span, as the vocabulary has it
        with self.lock:
            self.spans.append((phase, self.step, start, end, rows[0], rows[1], shapes[0], shapes[1], thread, group,
                               microbatch))

    def labels(self, made: float) -> None:
        """The last stage's targets for this step are made: its span runs from when their rows began to load."""
        start = self._labels if self._labels is not None else made
        self.add("labels", start, made)
        self._labels = None

    def _compute(self, method: Callable, phase: str) -> Callable:
        """One microbatch's forward or backward, timed; the activations it leaves (forward) or frees (backward)."""
        def timed(microbatch: int, *args: Any, **kwargs: Any) -> Any:
            start = self.now()
            posted = self._posted.pop(phase, None)
            if posted is not None:  # the receive this compute waited for ends here
                self.add(posted[2], posted[1], start, microbatch=posted[0])
            before = self.held.get("activations", 0)
            given = first_tensor((args[:1], {}))  # the first stage's microbatch; the others' come from their receive
            shape = list(given.shape) if isinstance(given, torch.Tensor) and given.dim() else self._received
            spent = time.thread_time()
            result = method(microbatch, *args, **kwargs)
            self._spent(phase, microbatch, time.thread_time() - spent)
            end = self.now()
            rows = self.rows
            if phase == "forward":
                self._forwarded = microbatch
                out = first_tensor(result)
                self._out_shape = list(out.shape) if out is not None else []
                self.add("forward", start, end, (microbatch * rows, rows), (shape, self._out_shape), microbatch=microbatch)
                self._in_flight[microbatch] = self.held.get("activations", 0) - before
            else:
                # What its backward starts from: the loss on the last stage, else the gradient received for its output.
                self.add("backward", start, end, (microbatch * rows, rows),
                         (self._loss_shape if self.last else self._out_shape, None), microbatch=microbatch)
                freed = self._in_flight.pop(microbatch, 0)
                self.held["activations"] = max(0, self.held.get("activations", 0) - freed)
            self._kept(phase, microbatch)
            return result
        return timed

    def _unseen(self, method: Callable, module: torch.nn.Module) -> Callable:
        """torch's shape inference, left without a trace. In the first step, given no example shapes, a stage runs its
        layers once more in training mode to learn what it sends (the first on the first microbatch, the others on
        uninitialised memory): a forward no microbatch makes. It would move BatchNorm's running statistics (to NaN,
        from that memory) and count activations no backward frees. It runs on copies of the stage's buffers, the
        originals put back after (objects swapped, nothing written in place: its graph keeps the copies), and the
        ledger does not watch it. What it sends ahead (the shapes) is torch's, unchanged."""
        def inferred(*args: Any, **kwargs: Any) -> Any:
            owned = [(owner, name, buffer) for owner in module.modules() for name, buffer in owner._buffers.items()
                     if buffer is not None]
            for owner, name, buffer in owned:
                owner._buffers[name] = buffer.clone()
            watching = bool(self.activations)  # the forward hooks are on in the steps whose memory is kept
            self._watch(False)
            try:
                return method(*args, **kwargs)
            finally:
                for owner, name, buffer in owned:
                    owner._buffers[name] = buffer
                self._watch(watching)
        return inferred

    def _posting(self, method: Callable, phase: str) -> Callable:
        def posted(microbatch: int, *args: Any, **kwargs: Any) -> Any:
            start = self.now()
            ops = method(microbatch, *args, **kwargs)
            if not ops:  # the first stage receives no activations, the last sends none, and so on
                return ops
            if phase in WAITED_BY:
                self._posted[WAITED_BY[phase]] = (microbatch, start, phase)
                if phase == "receive_activations":
                    self._received = list(ops[0].tensor.shape)
            else:
                self.add(phase, start, self.now(), microbatch=microbatch)
                with self.lock:
                    kept = self.sent.setdefault((self.step, phase), [0, 0])
                    kept[0] += 1
                    kept[1] += sum(nbytes(op.tensor) for op in ops)
            return ops
        return posted

    def timed_loss(self, loss: Callable[[Any, Any], torch.Tensor]) -> Callable[[Any, Any], torch.Tensor]:
        """The last stage's loss function, as the schedule calls it after each microbatch's forward."""
        def timed(output: Any, target: Any) -> torch.Tensor:
            start = self.now()
            spent = time.thread_time()
            value = loss(output, target)
            if self._forwarded < 0:  # the first step's shape inference, before any microbatch: torch's setup
                return value
            self._spent("loss", self._forwarded, time.thread_time() - spent)
            self.add("loss", start, self.now(), microbatch=self._forwarded)
            self._loss_shape = list(value.shape)
            return value
        return timed

    def _spent(self, phase: str, microbatch: int, seconds: float) -> None:
        """The CPU time this thread spent in one pass (on the CPU only: a GPU's work is not its thread's)."""
        if not self.cuda:
            self.cpu.append([self.step, phase, microbatch, round(seconds, 9)])

    # ---- memory: activations held per microbatch in flight, between its forward and its backward
    def _kept(self, phase: str, microbatch: int) -> None:
        if self.step not in self.memory_steps:
            return
        held = self.held.get("activations", 0)
        self.flight.append([self.step, phase, microbatch, held, len(self._in_flight)])
        if self._peak is None or held > self._peak.get("activations", 0):
            self._peak = dict(self.held)

    def snapshot(self, phase: str) -> None:
        if self.step in self.sampled:
            super().snapshot(phase)

    def schedule_ended(self) -> None:
        """The step's schedule has run: the ledger's peak is this step's "forward" sample (every microbatch in flight
        at once, as many as the schedule keeps), then what backward left (the gradients)."""
        if self.step in self.sampled and not self.cuda and self._peak is not None:
            self.memory_samples += [(self.step, "forward", c, b) for c, b in self._peak.items() if b]
        self._peak = None

    def step_ended(self) -> None:
        super().step_ended()
        self._in_flight.clear()
        self._forwarded = -1

    def facts(self) -> dict:
        """The activations this stage held after each forward and backward of the steps whose memory is kept, what
        it sent in each step ([step, phase, sends, bytes]), the CPU time of each of its passes (on the CPU) and the
        cores its process could run on (the host's wall clock is theirs)."""
        return {"layers": self.layers, "flight": self.flight, "cpu": self.cpu, "cores": cores(),
                "sent": [[step, phase, calls, size] for (step, phase), (calls, size) in sorted(self.sent.items())]}

    def close(self) -> None:
        self._watch(False)


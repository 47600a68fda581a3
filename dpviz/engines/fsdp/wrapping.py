"""Which modules FSDP2 shards, and the observer that times what it does in each step.

    model, observer, seconds = wrap(model, config, rank, cuda, local_rank, memory_steps)   # the spec's `wrap`

`fully_shard` each module that holds parameters of its own (each Linear, BatchNorm, convolution, GRU), or each
block of a model that keeps its blocks in an nn.ModuleList, then the root. Every parameter becomes a DTensor
sharded on dim 0: a rank keeps rows k/W.. of each one. In forward FSDP all-gathers a module's parameters just
before it runs and frees them (reshards) after; in backward it gathers them again, and reduce-scatters the
gradients so that each rank keeps the sum of its own rows' gradients only (on gloo an all-reduce, of which each
rank keeps its shard).

The observer times FSDP2's own methods on each parameter group (`pre_forward`, which all-gathers; `post_forward`,
which reshards; `pre_backward`, which all-gathers again; `post_backward`, which reshards and reduce-scatters
through `foreach_reduce`), wrapped on the instances, as DDP's observer wraps DDP's: what they do is unchanged.
Each span names its sharded module by its index in `group` (the order modules were sharded in, the root last).
Each parameter group's all-gather and reduce-scatter objects are wrapped too, to write down the bytes of the
tensors they are handed: the whole (padded) parameters an all-gather fills, the whole (padded) gradients a
reduce-scatter is given.
"""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard import _fsdp_param_group
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState

from dpviz.engines.ddp.observer import RankObserver
from dpviz.engines.ranks.program import local
from dpviz.engines.workload.units import TIED, shard_units, tied_groups
from dpviz.engines.workload.memory import nbytes, stored_bytes
from dpviz.engines.workload.precision import mixed, policy


def wrap(model: nn.Module, config: Any, rank: int, cuda: bool, local_rank: int,
         memory_steps: set[int], *, prepare: Any = None, observing: type | None = None) -> tuple[nn.Module, "ShardObserver", float]:
    """fully_shard each unit, then the root; the model (now sharded in place), its observer, the seconds it took.
    `prepare(model)`, run first, may return the DeviceMesh dimension to shard over (FSDP × TP: on_mesh.py, which
    cuts the model first and observes with `observing`); without it, every rank (FSDP2's default mesh)."""
    begin = time.perf_counter()
    over = {} if prepare is None else {"mesh": prepare(model)}
    units = shard_units(model)
    cast = lambda module: {"mp_policy": policy(config, module)} if mixed(config) else {}  # else FSDP2's default
    for _, unit in units:
        fully_shard(unit, reshard_after_forward=config.reshard_after_forward, **cast(unit), **over)
    fully_shard(model, reshard_after_forward=config.reshard_after_forward, **cast(model), **over)
    sharded = time.perf_counter()
    observer = (observing or ShardObserver)(rank, model, [name for name, _ in units] + [""], cuda, memory_steps,
                                            "NCCL" if cuda else "gloo", config.dim)
    observer.add("shard", begin, sharded)
    observer.snapshot("shard")
    return observer.timed_model(), observer, sharded - begin


def groups_of(model: nn.Module) -> list[tuple[str, Any]]:
    """(module name, FSDP2 parameter group) of every sharded module that holds parameters of its own."""
    out = []
    for name, module in model.named_modules():
        state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
        for group in getattr(state, "_fsdp_param_groups", []) or []:
            out.append((name, group))
    return out


class ShardObserver(RankObserver):
    """Spans and a memory ledger of one FSDP rank: DDP's observer's ledger and spans, with FSDP2's steps timed."""

    def __init__(self, rank: int, model: nn.Module, order: list[str], cuda: bool, memory_steps: set[int],
                 thread_name: str, dim: int = 0):
        # Not RankObserver.__init__: there is no DDP object to time, no buckets.
        self._keep_records(rank, None, cuda, memory_steps, thread_name, dim)
        self.model = model
        self._peaks: dict[int, int] = {}  # step -> the most bytes of parameters gathered at once in its forward
        self._kept: dict[tuple[str, int, int], int] = {}  # (phase, step, module) -> its span's index
        self.in_backward = False  # a step's all-gathers after its first pre_backward are backward's
        # Each shard's storage, padded to a multiple of the ranks' rows: what every rank allocates, real rows or none.
        self.held = {"parameters": stored_bytes([local(p) for p in model.parameters()]) +
                     nbytes(list(model.buffers()))}
        self.gathered_bytes: dict[int, int] = {}  # per group: bytes of its whole (unsharded) parameters
        self.groups: list[tuple[int, Any]] = []
        self.modules: list[dict] = []  # per sharded module: its index (a span's group), name and parameters
        index = {name: i for i, name in enumerate(order)}
        names = {id(p): name for name, p in model.named_parameters()}
        for tied in tied_groups(model):  # one parameter several modules use: every name it goes by, in one
            names[id(model.get_parameter(tied[0]))] = TIED.join(tied)
        for name, group in groups_of(model):
            world = group.mesh_info.shard_mesh_size  # the ranks it shards over: all, or a mesh's dp_shard group
            at = index.get(name, len(order) - 1)
            self.groups.append((at, group))
            params = [p.sharded_param for p in group.fsdp_params if id(p.sharded_param) in names]
            self.modules.append({"index": at, "name": name, "params": [names[id(p)] for p in params],
                                 "held": sum(local(p).numel() for p in params)})  # elements of this rank's shards
            # What FSDP2's all-gather output holds while the group is whole: every rank's padded shard (dim 0 padded
            # to a multiple of the ranks), not the parameters' own sizes.
            # Under a MixedPrecisionPolicy the gathered parameters are its param_dtype's (bfloat16), not the shards'.
            self.gathered_bytes[id(group)] = sum(p.padded_sharded_param_size.numel() * world *
                                                 (group.mp_policy.param_dtype or p.sharded_param.dtype).itemsize
                                                 for p in group.fsdp_params)
            self._time_group(at, group)
            group._all_gather_comm = _Counted(group._all_gather_comm, self._gathering)
            group._reduce_scatter_comm = _Counted(group._reduce_scatter_comm, self._reducing_bytes)
        self.reduce_thread = (f"{thread_name}: a reduce-scatter" if cuda else
                              "gloo has no reduce-scatter: run as an all-reduce, each rank keeping its shard")
        self._reducing: int | None = None
        self._patch_reduce()
        self.watch_activations(model)

    # ---- FSDP2's steps, per sharded module
    def _time_group(self, index: int, group: Any) -> None:
        def timed(method, phase: str, thread: str | None = None):
            def call(*args: Any, **kwargs: Any) -> Any:
                start = self.now()
                try:
                    return method(*args, **kwargs)
                finally:
                    end = self.now()
                    self.add(phase, start, end, thread=thread, group=index)
                    self._gathered()
            return call

        forward_began: dict[str, float] = {}
        pre_forward, post_forward = group.pre_forward, group.post_forward

        def before(*args: Any, **kwargs: Any) -> Any:
            start = self.now()
            try:
                return pre_forward(*args, **kwargs)
            finally:
                forward_began["at"] = self.now()
                self.add("gather", start, forward_began["at"], thread=self.thread_name, group=index)
                self._gathered()
                self._gather_peak()

        def after(*args: Any, **kwargs: Any) -> Any:
            start = self.now()
            if "at" in forward_began:
                self.add("compute", forward_began.pop("at"), start, group=index)
            try:
                return post_forward(*args, **kwargs)
            finally:
                if not group.is_unsharded:  # reshard_after_forward=False keeps them whole: nothing was freed
                    self.add("reshard", start, self.now(), group=index)
                self._gathered()

        group.pre_forward, group.post_forward = before, after
        pre_backward, post_backward = group.pre_backward, group.post_backward

        def gather_again(*args: Any, **kwargs: Any) -> Any:
            self.in_backward = True
            if group._training_state == TrainingState.PRE_BACKWARD or group.is_unsharded:
                return pre_backward(*args, **kwargs)  # FSDP2 gathers nothing: already whole (or kept whole)
            return timed(pre_backward, "gather_backward", self.thread_name)(*args, **kwargs)

        def backward_done(*args: Any, **kwargs: Any) -> Any:
            self._reducing = index  # its foreach_reduce is this module's reduce-scatter
            try:
                return post_backward(*args, **kwargs)
            finally:
                self._reducing = None
                self._gathered()

        group.pre_backward, group.post_backward = gather_again, backward_done

    def add(self, phase: str, start: float, end: float, rows: tuple[int, int] = (0, 0), shapes=(None, None),
            thread: str | None = None, group: int | None = None) -> None:
        """A span; a module's phase met twice in one step (a module called twice) widens the first one."""
        if group is None:
            return super().add(phase, start, end, rows, shapes, thread, group)
        key = (phase, self.step, group)
        with self.lock:
            if key in self._kept:
                at = self._kept[key]
                kept = self.spans[at]
                self.spans[at] = (*kept[:2], min(kept[2], start), max(kept[3], end), *kept[4:])
                return
            self._kept[key] = len(self.spans)
            self.spans.append((phase, self.step, start, end, rows[0], rows[1], shapes[0], shapes[1], thread, group))

    # ---- bytes handed to the collectives
    def _gathering(self, output: torch.Tensor, given: torch.Tensor) -> None:
        self.passed("all-gather (backward)" if self.in_backward else "all-gather (forward)", nbytes(output))

    def _reducing_bytes(self, output: torch.Tensor, given: torch.Tensor) -> None:
        self.passed("reduce-scatter", nbytes(given))

    def step_ended(self) -> None:
        super().step_ended()
        self.in_backward = False

    def _gather_peak(self) -> None:
        """The ledger when the most parameters are gathered in this step's forward: the memory view's
        "all-gather" sample (a snapshot after forward would find them freed again)."""
        if self.step not in self.memory_steps or self.cuda:
            return
        gathered = self.held.get("gathered parameters", 0)
        if gathered <= self._peaks.get(self.step, -1):
            return
        self._peaks[self.step] = gathered
        self.memory_samples = [m for m in self.memory_samples if (m[0], m[1]) != (self.step, "gather")]
        self.snapshot("gather")

    def _patch_reduce(self) -> None:
        """foreach_reduce, the reduce-scatter of a group's gradients, timed (this process's own module global)."""
        reduce = getattr(_fsdp_param_group.foreach_reduce, "__wrapped__", _fsdp_param_group.foreach_reduce)
        observer = self

        def timed_reduce(*args: Any, **kwargs: Any) -> Any:
            start = observer.now()
            try:
                return reduce(*args, **kwargs)
            finally:
                if observer._reducing is not None:
                    observer.add("reduce_scatter", start, observer.now(), thread=observer.reduce_thread,
                                 group=observer._reducing)

        timed_reduce.__wrapped__ = reduce
        _fsdp_param_group.foreach_reduce = timed_reduce

    def _gathered(self) -> None:
        """The ledger's gathered parameters: the whole parameters of every group that holds them now."""
        self.set("gathered parameters", sum(self.gathered_bytes[id(g)] for _, g in self.groups if g.is_unsharded))

    # ---- the whole forward on the rank's rows
    def timed_model(self):
        """The whole forward on the rank's rows, timed as DDP's module forward is."""
        return self._timed_forward(self.model)

    def facts(self) -> dict:
        """The sharded modules, in the order of their index: which parameters each one gathers, and how many
        elements of them this rank holds (its shards, counted from to_local())."""
        return {"modules": sorted(self.modules, key=lambda m: m["index"])}

    def close(self) -> None:
        self._settle()
        super().close()
        reduce = getattr(_fsdp_param_group.foreach_reduce, "__wrapped__", None)
        if reduce is not None:
            _fsdp_param_group.foreach_reduce = reduce

    def _settle(self) -> None:
        """Leave FSDP2 as a finished step leaves it. A step that raised inside FSDP2's forward or backward stops
        half way: the modules it had gathered stay whole, their own parameters swapped for the whole ones (their
        post_forward never ran), and FSDP2 thinks itself mid-step. What the rank holds at its end (its shards, the
        parameters its optimizer steps) is read from the model's parameters after this, so they must be the
        shards again: reset as FSDP2's own recovery does (reset_iter_state, on the root). A rank whose steps all
        finished is left as it is."""
        root = self.model._get_fsdp_state()
        states = root._state_ctx.all_states or [root]  # every sharded module's state, once the first forward began
        groups = [group for state in states for group in state._fsdp_param_groups]
        if all(s._training_state == TrainingState.IDLE for s in [*states, *groups]):
            return
        if hasattr(self.model, "reset_iter_state"):  # FSDP2's own recovery, where this torch has it
            self.model.reset_iter_state()
            return
        for state in states:  # otherwise what it does that matters here: every group sharded again, and idle
            state._training_state = TrainingState.IDLE
        for group in groups:
            group._training_state = TrainingState.IDLE
            group.reshard()


class _Counted:
    """One of FSDP2's collectives (a parameter group's all-gather or reduce-scatter object), doing what it did,
    that first tells `count(output, input)` the tensors it is handed."""

    def __init__(self, collective: Any, count: Any):
        self.collective, self.count = collective, count

    def allocate(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return self.collective.allocate(*args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        given = dict(zip(("output_tensor", "input_tensor"), args), **kwargs)
        self.count(given["output_tensor"], given["input_tensor"])
        return self.collective(*args, **kwargs)

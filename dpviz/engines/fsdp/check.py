"""The rules of an FSDP trace: DDP's (every rank loads its sampler's rows), and, once it has trained, what each
rank held: a shard of every parameter, the gradients and the optimizer state of that shard. Plain Python:
loading a trace needs no torch.

    check_trace(trace)      # TraceError (one sentence) unless the trace is what an FSDP run records
"""
from __future__ import annotations

from dpviz.trace import Trace
from dpviz.trace.values import TraceError
from dpviz.engines.ddp.check import check_steps, held_of
from dpviz.engines.fsdp.mesh import DIMS, group_of


def check_trace(trace: Trace) -> None:
    """Raise TraceError unless `trace` is what fully_shard over the ranks could have recorded."""
    check_steps(trace, trace.config.tp)  # the ranks of a tensor-parallel group load the same rows
    check_shards(trace)
    check_modules(trace)
    check_groups(trace)


def check_groups(trace: Trace) -> None:
    """Every collective a rank wrote down ran in one of its mesh groups: the tensor-parallel group's or the
    dp_shard group's (a run on one dimension writes none down)."""
    ranks, tp = trace.config.gpus, trace.config.tp
    for rank, rows in enumerate(trace.facts.get("comm_groups") or []):
        mine = [group_of(rank, ranks, tp, dim) for dim in DIMS]
        for collective, group, _ in rows or []:
            if group not in mine:
                raise TraceError(f"rank {rank} ran {collective} with ranks {group}; on a {ranks // tp} × {tp} mesh its "
                                 f"groups are {mine[0]} ({DIMS[0]}) and {mine[1]} ({DIMS[1]}).")


def check_modules(trace: Trace) -> None:
    """Every rank names the same sharded modules, those the spans name, gathering parameters the ranks hold."""
    reported = [rank for rank in trace.facts.get("modules") or [] if rank is not None]
    if not reported:
        return
    if len(trace.facts["modules"]) != trace.config.gpus:
        raise TraceError(f"facts modules has {len(trace.facts['modules']):,} ranks; the run has {trace.config.gpus:,}.")
    shape = lambda rank: [(m["index"], m["name"], m["params"]) for m in rank]
    if any(shape(rank) != shape(reported[0]) for rank in reported):
        raise TraceError("the ranks name different sharded modules; FSDP shards the same modules on every rank.")
    named = {m["index"] for m in reported[0]}
    spanned = {s.group for s in trace.spans if s.group is not None}
    if not spanned <= named:
        raise TraceError(f"spans name sharded module {min(spanned - named) + 1:,}, which facts modules does not list.")
    held = held_of(trace)
    # Every parameter a module gathers is one rank 0 steps, unless some do not train (a frozen part: held, not
    # stepped, and the trace names only the stepped ones).
    everything = held and sum(e for _, e in held[0]["owns"]) == held[0]["parameters"]["elements"]
    owned = {name for name, _ in held[0]["owns"]} if everything else None
    for module in reported[0]:
        # A tied parameter goes by all its names ("embed.weight = out.weight"); the optimizer names it by its first.
        unknown = [p for p in module["params"] if owned is not None and p.split(" = ")[0] not in owned]
        if unknown:
            raise TraceError(f"sharded module {module['name'] or 'root'} gathers {unknown[0]}, which no rank holds a "
                             "shard of.")


def check_shards(trace: Trace) -> None:
    """Every rank steps its shard of every trainable parameter (the same parameters on every rank), no more than
    it holds, and holds gradients of those shards at most (FSDP keeps the gradient of the rank's shard only; a
    parameter forward never used has none)."""
    held = held_of(trace)
    if held is None:
        return
    names = [sorted(name for name, _ in mine["owns"]) for mine in held]
    for rank, mine in enumerate(held):
        if names[rank] != names[0]:
            raise TraceError(f"rank {rank} steps the parameters {', '.join(names[rank][:3])}...; under FSDP every "
                             f"rank steps its shard of every parameter, as rank 0 does ({len(names[0]):,}).")
        owned = sum(elements for _, elements in mine["owns"])
        trainable = mine["gradients"]["elements"]
        if trainable > owned or owned > mine["parameters"]["elements"]:
            raise TraceError(f"rank {rank} steps shards of {owned:,} elements and holds gradients of {trainable:,}; "
                             "under FSDP the gradients are those of the shards it steps.")

"""Where the memory goes: each engine's memory per device by kind, and the bytes each rank hands its collectives.

    memory_by_kind(trace)        # per lane, at the end of the last full step: bytes by FAMILIES (the memory ledger)
    bytes_per_step(trace)        # per lane: bytes handed to each collective per step (measured), sent (computed)
    reading([ddp, zero1, fsdp])  # one line: what the runs side by side show, every number from them

Memory comes from each engine's ledger, counted from the tensors each rank (or simulated device) holds, its
kinds put in common terms by their `family` (DDP's gradient buckets and FSDP's gathered parameters are both
communication buffers). Bytes handed to collectives are what the ranks wrote down as they called them
(facts["moved"]: the tensors' sizes); the bytes a rank sends for them are computed from the textbook ring
algorithms NCCL runs (each engine's `wire` part), not measured: gloo on the CPU runs other algorithms, and
FSDP's reduce-scatter as an all-reduce. Sent, not sent and received: the one count of a comparison's Compare
figure too, whose DDP and DataParallel bars are these same numbers (dpviz.analysis.compare.sent_per_step). No torch.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from dpviz.analysis.batch_facts import batches_planned
from dpviz.analysis.traffic import counted_step, sent_per_step
from dpviz.analysis.wording import bytes_alike, counted, human_bytes, numbered, plain_label
from dpviz.trace import Trace

FAMILIES = ("parameters", "gradients", "optimizer state", "activations", "communication buffers")
MODEL_STATE = FAMILIES[:3]  # what ZeRO and FSDP shard
COLLECTIVES = ("all-reduce", "broadcast", "all-gather (forward)", "all-gather (backward)", "reduce-scatter")


@dataclass(frozen=True)
class LaneMemory:
    """One lane (a rank, or a simulated GPU) of one run, read at the moment every device of every engine is read."""

    engine: str  # the engine's short label: "DDP"
    lane: str  # "rank 0"
    moment: str  # "the end of step 3 of 3 (after optimizer step); activations at their peak in it"
    kinds: dict[str, int]  # family -> bytes, FAMILIES first, any other kind (a GPU's measured figure) after

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    @property
    def model_state(self) -> int:
        return sum(self.kinds.get(kind, 0) for kind in MODEL_STATE)


def moment_step(trace: Trace) -> int | None:
    """The step every device is read at: the last one in which every device ran a whole batch (the last with the
    most rows), so that no engine's ranks are read mid-warm-up or on a short last batch; None without a ledger."""
    sampled = {m.batch for m in trace.memory}
    if not sampled:
        return None
    full = max((b.rows for b in trace.batches if b.index in sampled), default=0)
    return max((b.index for b in trace.batches if b.index in sampled and b.rows == full), default=max(sampled))


def memory_by_kind(trace: Trace) -> list[LaneMemory]:
    """Per lane, like with like across engines: what it keeps (parameters, gradients, optimizer state, a bucket) at
    the end of `moment_step`, after the optimizer's step and before the gradients are zeroed (its last phase that
    sampled the ledger), and what is made and freed within a step (activations, gathered parameters) at its peak
    in that step, by family of kind."""
    step = moment_step(trace)
    if step is None:
        return []
    vocabulary = trace.vocabulary
    order = vocabulary.order
    at: dict[tuple[int, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for sample in trace.memory:
        if sample.batch == step:
            at[(sample.lane, sample.phase)][sample.category] += sample.bytes
    # One moment for every lane: the step's last phase that sampled the ledger on any lane (DataParallel's optimizer
    # step runs on GPU 0 alone; a replica holds nothing it keeps by then, and is read at that moment all the same).
    last = max((phase for _, phase in at), key=lambda p: order.get(p, len(order)), default=None)
    out = []
    for lane in trace.lanes:
        phases = sorted((phase for key_lane, phase in at if key_lane == lane.id), key=lambda p: order.get(p, len(order)))
        if not phases:
            continue
        kinds: dict[str, int] = defaultdict(int)
        for category in {c for phase in phases for c in at[(lane.id, phase)]}:
            kind = vocabulary.memory_kind(category)
            family = kind.compared_as if kind is not None else category
            if kind is not None and kind.transient:  # made and freed within the step: its peak
                kinds[family] += max(at[(lane.id, phase)].get(category, 0) for phase in phases)
            else:  # kept from step to step: as the step leaves it
                kinds[family] += at.get((lane.id, last), {}).get(category, 0)
        label = plain_label(vocabulary.phase(last).label) if last in order else last
        ordered = {k: kinds[k] for k in FAMILIES if kinds.get(k)} | {k: v for k, v in kinds.items() if k not in FAMILIES and v}
        out.append(LaneMemory(trace.spec.short, vocabulary.lane_name(lane.id),
                              f"the end of {numbered(step, batches_planned(trace), trace.spec.unit)} (after {label}); "
                              "what a step makes and frees at its peak in it", ordered))
    return out


def moments(traces: list[Trace]) -> str:
    """'memory at the end of DataParallel's batch 2, DDP's step 2 (after the optimizer's step, before zero_grad);
    what a step makes and frees at its peak in it': the moment each engine's bars are read at, for the figure's
    notes ('' when no run sampled memory)."""
    read = []
    for trace in traces:
        step = moment_step(trace)
        if step is not None:
            read.append(f"{trace.spec.short}'s {trace.spec.unit} {counted(step)}")
    if not read:
        return ""
    return (f"memory at the end of {', '.join(read)} (after the optimizer's step, before zero_grad); "
            "what a step makes and frees at its peak in it")


@dataclass(frozen=True)
class LaneBytes:
    """One lane of one run: bytes it handed each collective (measured) and sent (computed) in one whole step."""

    engine: str
    lane: str
    measured: dict[str, float]  # collective -> bytes of the tensors handed to it in the step a comparison reads
    computed: float | None  # bytes the lane sends per step (the count the Compare figure's bars draw); None: unknown

    @property
    def total(self) -> float:
        return sum(self.measured.values())


def bytes_per_step(trace: Trace) -> list[LaneBytes]:
    """Per lane: what it handed each collective and what it sends (computed), in the one whole step a comparison
    reads (dpviz.analysis.traffic.counted_step)."""
    moved = trace.facts.get("moved") or []
    step = counted_step(trace)
    wire = sent_per_step(trace)
    out = []
    for lane, sent in zip(trace.lanes, wire):
        rows = moved[lane.id] if lane.id < len(moved) and moved[lane.id] else []
        handed: dict[str, float] = defaultdict(float)
        for at, collective, _calls, size in rows:
            if at == step:
                handed[collective] += size
        ordered = {c: handed[c] for c in COLLECTIVES if c in handed} | {c: v for c, v in handed.items() if c not in COLLECTIVES}
        out.append(LaneBytes(trace.spec.short, trace.vocabulary.lane_name(lane.id), ordered, sent))
    return out


# ---- the bytes a rank sends per step, by the ring algorithms (sharded-facts: P elements of b bytes, W ranks)

def held_bytes(trace: Trace, kind: str, sharded: bool) -> int | None:
    """Bytes of `kind` of the whole model: rank 0's (every rank holds all), or the ranks' shards summed."""
    held = trace.facts.get("held")
    if not held or None in held:
        return None
    return sum(h[kind]["bytes"] for h in held) if sharded else held[0][kind]["bytes"]


def ring_share(ranks: int) -> float:
    """(W-1)/W: what a ring all-gather or reduce-scatter sends of the whole tensor, per rank."""
    return (ranks - 1) / ranks if ranks > 1 else 0.0


# ---- the words on and under the chart

def state_title(traces: list[Trace], amount: Callable[[float], str] | None = None) -> str:
    """'Parameters, gradients and optimizer state on the fullest device: DDP 200 B, ZeRO-1 180 B, FSDP 104 B', each
    amount written by `amount` (a figure's own unit) or, without one, in the largest's unit."""
    most = [(t.spec.short, max((m.model_state for m in memory_by_kind(t)), default=0)) for t in traces]
    if not any(amount for _, amount in most):
        return "Memory and bytes per device"
    sizes = [size for _, size in most]
    shown = [amount(size) for size in sizes] if amount is not None else bytes_alike(*sizes)
    return ("Parameters, gradients and optimizer state on the fullest device: "
            + ", ".join(f"{name} {amount}" for (name, _), amount in zip(most, shown)))


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    a, b = bytes_alike(low, high)
    return a if a == b else f"{a} to {b}"


def reading(traces: list[Trace]) -> str:
    """One line: per engine, the parameters, gradients and optimizer state a device holds (where its optimizer
    state sits when not evenly), and the bytes it sends per step (computed), against the first engine of
    processes' (DDP's), every number from the runs."""
    parts = []
    first_sent, first_name = None, ""
    for trace in traces:
        memory, moved = memory_by_kind(trace), bytes_per_step(trace)
        if not memory:
            continue
        optimizer = [m.kinds.get("optimizer state", 0) for m in memory]
        part = f"{trace.spec.short} {_span([m.model_state for m in memory])}"
        holding = [m.lane for m, amount in zip(memory, optimizer) if amount]
        if holding and len(holding) < len(memory):
            part += f" (optimizer state on {', '.join(holding)} only)"
        elif holding and min(optimizer) * 2 <= max(optimizer):
            part += f" (optimizer state split unevenly: {_span(optimizer)})"
        sent = [b.computed for b in moved if b.computed is not None]
        if sent:
            part += f", {human_bytes(max(sent))}"
            if first_sent is None and trace.spec.processes:
                first_sent, first_name = max(sent), trace.spec.short
            elif first_sent and trace.spec.processes:
                part += f" ({max(sent) / first_sent:.1f}× {first_name}'s)"
        parts.append(part)
    if not parts:
        return ""
    return ("Parameters, gradients and optimizer state per device, and bytes sent per step (computed): "
            + "; ".join(parts) + ".")

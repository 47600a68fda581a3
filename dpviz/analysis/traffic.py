"""What each device of a run sends and receives, step by step, by kind of collective: the one count every
comparison draws (Compare's bars, the Memory page's diamonds, `dpviz compare`'s table).

    moves = traffic(trace)          # [Move]: per step and device, bytes sent and received, by kind and what
    counted_step(trace)             # the one step a comparison reads: the last whole step (that stepped the optimizer)
    sent_per_step(trace)            # per device: bytes it sends in that step
    which_steps([dp, ddp])          # "in one whole step each (DataParallel's batch 3, DDP's step 3)"
    moves_per_step(trace)           # per device: (sent, received) in that step

A comparison reads one whole step of each run, by one rule: an average over the run's steps counted a short last
batch (and a pipeline, which drops it, ran fewer steps than the engine beside it), so two engines' "per step"
figures were means of different things.

Each engine writes its own traffic (its spec's `traffic` part), from the trace alone: the rows each device got,
the tensors' sizes, the parameter and gradient bytes its ranks held. Computed, not measured: on simulated devices
and CPU processes nothing crosses a real link, so the bytes are those the textbook algorithms NCCL runs would
send (a ring's share for an all-reduce, an all-gather or a reduce-scatter). Every Move names the legend's kind
(dpviz.trace.legend) that carries it, so figures colour it the same whatever the engine. No torch.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dpviz.analysis.whole_steps import last_whole_step, whole_steps
from dpviz.analysis.wording import counted
from dpviz.trace import Trace
from dpviz.trace.legend import KINDS

STEP_PHASE = "step"  # the optimizer's step, as every engine that trains names its phase


@dataclass(frozen=True)
class Move:
    """Bytes one device sends and receives in one step for one reason."""

    step: int
    lane: int
    what: str  # in words: "input chunk", "parameter copy", "all-reduce", "activations"
    sent: int
    received: int
    kind: str = ""  # the legend's kind that carries it (dpviz.trace.legend.KINDS): "scatter", "all-reduce"
    backward: bool = False  # moved for the backward pass (an output's gradient, a gradient's reduce-scatter)
    # Each device's even share of a move the run splits unevenly between them (a ring's (W-1)/W of what one device
    # holds, given to every device): the figure is an average, not what the busiest device sent.
    evened: bool = False


def traffic(trace: Trace) -> list[Move]:
    """Every device's traffic, step by step (DataParallel's batches are its steps), as its engine moves it."""
    return trace.spec.part("traffic")(trace)


def ledger(trace: Trace, lane: int, *categories: str) -> int | None:
    """The largest figure the memory ledger holds for `categories` on `lane` (computed traces only)."""
    sizes = [m.bytes for m in trace.memory if m.lane == lane and m.category in categories]
    return max(sizes) if sizes else None


def counted_step(trace: Trace) -> int:
    """The step every comparison reads a run's bytes in: its last whole step (every device ran all its rows:
    dpviz.analysis.opening_step, the step One step opens on), and of those, when the run trains, the last that
    stepped the optimizer (a step that only accumulates gradients sends no all-reduce)."""
    whole = whole_steps(trace)
    stepped = [step for step in whole if trace.config.train and trace.spans_of(step, STEP_PHASE)]
    return (stepped or whole or [last_whole_step(trace)])[-1]


def _counted_moves(trace: Trace) -> list[Move]:
    step = counted_step(trace)
    return [move for move in traffic(trace) if move.step == step]


def moves_per_step(trace: Trace) -> list[tuple[int, int]]:
    """(sent, received) bytes per lane in the step a comparison reads (counted_step)."""
    sent: dict[int, int] = defaultdict(int)
    received: dict[int, int] = defaultdict(int)
    for move in _counted_moves(trace):
        sent[move.lane] += move.sent
        received[move.lane] += move.received
    return [(sent[lane.id], received[lane.id]) for lane in trace.lanes]


def evened(trace: Trace) -> bool:
    """Whether some of the run's traffic is an even share of what the devices move unevenly (Move.evened): each
    device's figure is then an average, said so wherever it is read."""
    return any(move.evened for move in traffic(trace))


def sent_per_step(trace: Trace) -> list[float]:
    """Bytes each lane sends in the step a comparison reads (counted_step): what every comparison's bars, diamonds
    and headline count."""
    sent: dict[int, int] = defaultdict(int)
    for move in _counted_moves(trace):
        sent[move.lane] += move.sent
    return [float(sent[lane.id]) for lane in trace.lanes]


def which_steps(traces: list[Trace]) -> str:
    """'in one whole step each (DataParallel's batch 3, DDP's step 4)', or 'in one whole step, step 3 of each': which
    step a comparison's bytes are of, said beside them."""
    read = {(t.spec.unit, counted_step(t)) for t in traces}
    if len(traces) > 1 and len(read) == 1:  # the same step of each: said once, a line shorter on a projector
        unit, step = read.pop()
        return f"in one whole {unit}, {unit} {counted(step)} of each"
    steps = ", ".join(f"{t.spec.short}'s {t.spec.unit} {counted(counted_step(t))}" for t in traces)
    return f"in one whole {'step each' if len(traces) > 1 else 'step'} ({steps})"


def sent_by_kind(trace: Trace) -> dict[tuple[str, str, bool], list[float]]:
    """(kind, what, backward) -> bytes each lane sends of it in the step a comparison reads, kinds in the legend's
    order."""
    totals: dict[tuple[str, str, bool], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for move in _counted_moves(trace):
        totals[(move.kind, move.what, move.backward)][move.lane] += move.sent
    order = {name: i for i, name in enumerate(KINDS)}
    return {key: [float(by_lane.get(lane.id, 0)) for lane in trace.lanes]
            for key, by_lane in sorted(totals.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0][2]))}

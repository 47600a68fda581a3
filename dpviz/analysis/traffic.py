"""What each device of a run sends and receives, step by step, by kind of collective: the one count every
comparison draws (Compare's bars, the Memory page's diamonds, `dpviz compare`'s table).

    moves = traffic(trace)          # [Move]: per step and device, bytes sent and received, by kind and what
    sent_per_step(trace)            # per device: bytes it sends in an average step of the run
    averaged([dp, ddp])             # 'averaged over 4 batches and 4 steps': what those bytes are a mean of
    moves_per_step(trace)           # per device: (sent, received) in an average step

Each engine writes its own traffic (its spec's `traffic` part), from the trace alone: the rows each device got,
the tensors' sizes, the parameter and gradient bytes its ranks held. Computed, not measured: on simulated devices
and CPU processes nothing crosses a real link, so the bytes are those the textbook algorithms NCCL runs would
send (a ring's share for an all-reduce, an all-gather or a reduce-scatter). Every Move names the legend's kind
(dpviz.trace.legend) that carries it, so figures colour it the same whatever the engine. No torch.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dpviz.analysis.wording import plural
from dpviz.trace import Trace
from dpviz.trace.legend import KINDS


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


def moves_per_step(trace: Trace) -> list[tuple[int, int]]:
    """(sent, received) bytes per lane in an average step of the run."""
    sent: dict[int, int] = defaultdict(int)
    received: dict[int, int] = defaultdict(int)
    for move in traffic(trace):
        sent[move.lane] += move.sent
        received[move.lane] += move.received
    steps = max(1, len(trace.batches))
    return [(sent[lane.id] // steps, received[lane.id] // steps) for lane in trace.lanes]


def evened(trace: Trace) -> bool:
    """Whether some of the run's traffic is an even share of what the devices move unevenly (Move.evened): each
    device's figure is then an average, said so wherever it is read."""
    return any(move.evened for move in traffic(trace))


def sent_per_step(trace: Trace) -> list[float]:
    """Bytes each lane sends in an average step of the run: what every comparison's bars and diamonds count."""
    sent: dict[int, int] = defaultdict(int)
    for move in traffic(trace):
        sent[move.lane] += move.sent
    steps = max(1, len(trace.batches))
    return [sent[lane.id] / steps for lane in trace.lanes]


def averaged(traces: list[Trace]) -> str:
    """'averaged over 4 batches and 4 steps': what a comparison's bytes per step are a mean of, said beside them
    (One step shows one step's, which a short last step makes differ from the mean)."""
    return "averaged over " + " and ".join(dict.fromkeys(plural(len(t.batches), t.spec.unit) for t in traces))


def sent_by_kind(trace: Trace) -> dict[tuple[str, str, bool], list[float]]:
    """(kind, what, backward) -> bytes each lane sends of it in an average step, kinds in the legend's order."""
    totals: dict[tuple[str, str, bool], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for move in traffic(trace):
        totals[(move.kind, move.what, move.backward)][move.lane] += move.sent
    steps = max(1, len(trace.batches))
    order = {name: i for i, name in enumerate(KINDS)}
    return {key: [by_lane.get(lane.id, 0) / steps for lane in trace.lanes]
            for key, by_lane in sorted(totals.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0][2]))}

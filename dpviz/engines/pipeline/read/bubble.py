"""A pipeline step read from its spans: when each stage computed, when it waited, and the share of the step it
spent idle, beside the textbook's figure for it.

    window(trace, 1)           # (start, end) of step 1: the first forward to the last backward, on any stage
    idle_share(trace, 1)       # 0.43: of the stages' time in that window, the share no forward or backward filled
    textbook_share(4, 4)       # 3/7: (S - 1) / (M + S - 1), with every forward and backward taking equal time
    replay(trace, 1)           # Replay: the step laid again with each stage on a device of its own; .share its bubble

The idle share is computed from the same spans the Schedule view draws: per stage, the window less its forwards,
backwards and losses (a receive's wait counts as idle: the stage had nothing to do), summed over the stages. That is
this host's wall clock, on which the stages' processes also wait for a core and for gloo. The replay is the bubble
the schedule itself makes: each pass lasts what it cost (its thread's CPU time, which waiting for a core does not
count; on GPUs, its wall time on the stage's own device), and starts as soon as its stage is free and what it needs
has arrived, in the order torch ran the stage's passes: a forward after the stage before's forward of the same
microbatch, a backward after the next stage's backward of it; sends take no time, as in the textbook.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dpviz.trace import Span, Trace

SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B"}  # torch's ScheduleGPipe and Schedule1F1B, as the textbooks name them
COMPUTE = ("forward", "backward", "loss")  # what a stage does of the step's own work


def computes(trace: Trace, step: int, stage: int | None = None) -> list[Span]:
    """The step's forwards, backwards and losses (of one stage, or every stage), in the order they began."""
    return sorted((s for s in trace.spans_of(step) if s.phase in COMPUTE and (stage is None or s.lane == stage)),
                  key=lambda s: s.start)


def window(trace: Trace, step: int) -> tuple[float, float]:
    """From the step's first forward to its last backward, on whichever stages ran them."""
    spans = computes(trace, step)
    if not spans:
        raise ValueError(f"step {step + 1:,} ran no microbatch")
    return min(s.start for s in spans), max(s.end for s in spans)


def busy(trace: Trace, step: int, stage: int) -> float:
    """Seconds the stage computed in the step (its forwards, backwards and losses: they never overlap)."""
    return sum(s.duration for s in computes(trace, step, stage))


def idle_share(trace: Trace, step: int) -> float:
    """The share of the stages' time in the step's window that no forward, backward or loss filled."""
    start, end = window(trace, step)
    stages = len(trace.lanes)
    total = (end - start) * stages
    return 0.0 if total <= 0 else max(0.0, 1 - sum(busy(trace, step, s) for s in range(stages)) / total)


def textbook_share(stages: int, microbatches: int) -> float:
    """GPipe's (and 1F1B's) bubble, (S - 1) / (M + S - 1): the idle share when every forward and every backward
    takes the same time on every stage and sending takes none."""
    return (stages - 1) / (microbatches + stages - 1)


def order(trace: Trace, step: int, stage: int) -> list[tuple[str, int]]:
    """The stage's forwards and backwards in the step, in the order it ran them: ("F", 0), ("B", 0), ..."""
    return [("F" if s.phase == "forward" else "B", s.microbatch) for s in computes(trace, step, stage)
            if s.phase != "loss"]


def ended(trace: Trace, step: int) -> bool:
    """Whether `step` ran to its end: every step before a failure's."""
    return trace.failure is None or step < trace.failure.batch


def slots(trace: Trace, step: int) -> list[list[tuple[str, int, int]]] | None:
    """The step as the textbook draws it: each stage's forwards and backwards in the order the stage ran them, each
    one slot long (lay_out); None for a step that did not end (a failure's: its passes are a part of the step's)."""
    if not ended(trace, step):
        return None
    return lay_out([order(trace, step, stage) for stage in range(len(trace.lanes))])


def lay_out(orders: list[list[tuple[str, int]]],
            length: Callable[[str, int, int], float] = lambda kind, stage, micro: 1) -> list[list[tuple]] | None:
    """Each stage's passes in its order, each `length(kind, stage, microbatch)` long (one slot unless given), started
    as soon as the stage is free and what it needs has arrived (a forward the stage before's forward of the same
    microbatch, a backward the next stage's backward of it); per stage (kind, microbatch, start). None when the
    orders wait on each other for ever."""
    stages = len(orders)
    done: dict[tuple[str, int, int], float] = {}  # (kind, stage, microbatch) -> when it ended
    free, at, laid = [0] * stages, [0] * stages, [[] for _ in range(stages)]
    while any(at[s] < len(orders[s]) for s in range(stages)):
        moved = False
        for stage in range(stages):
            if at[stage] == len(orders[stage]):
                continue
            kind, micro = orders[stage][at[stage]]
            need = ("F", stage - 1, micro) if kind == "F" and stage > 0 else \
                ("B", stage + 1, micro) if kind == "B" and stage < stages - 1 else None
            if need is not None and need not in done:
                continue
            start = max(free[stage], done.get(need, 0))
            laid[stage].append((kind, micro, start))
            done[kind, stage, micro] = free[stage] = start + length(kind, stage, micro)
            at[stage] += 1
            moved = True
        if not moved:
            return None
    return laid


def schedule_order(schedule: str, stages: int, microbatches: int, stage: int) -> list[tuple[str, int]]:
    """The order torch's schedule runs a stage's passes in, as its _step_microbatches does (torch 2.13): GPipe every
    forward, then every backward; 1F1B min(M, S - stage) forwards, then a backward and a forward in turn, then the
    backwards left. For drawing a schedule that did not run beside one that did (the run's own order is measured)."""
    if schedule == "gpipe":
        return [("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)]
    warmup = min(microbatches, stages - stage)
    out = [("F", m) for m in range(warmup)]
    forward, backward = warmup, 0
    while backward < microbatches:
        out.append(("B", backward))
        backward += 1
        if forward < microbatches:
            out.append(("F", forward))
            forward += 1
    return out


def slot_share(laid: list[list[tuple[str, int, int]]]) -> float:
    """The idle share of a step laid out in slots: what the stages left empty of the slots the step took."""
    total = max((start + 1 for stage in laid for _, _, start in stage), default=0) * len(laid)
    return 0.0 if total == 0 else 1 - sum(len(stage) for stage in laid) / total


# How a replay's passes were timed: the clock each pass's duration was read from.
CPU, DEVICE, WALL = "cpu", "device", "wall"


@dataclass(frozen=True)
class Replay:
    """A step replayed with each stage on a device of its own: per stage its passes (kind, microbatch, start, length)
    in seconds from the step's start, and how the lengths were timed (CPU: each pass's thread's CPU time; DEVICE:
    its wall time on a GPU of its own; WALL: a file that kept no CPU time, so its wall time on this host)."""

    passes: list[list[tuple[str, int, float, float]]]
    clock: str

    @property
    def length(self) -> float:
        return max((start + size for stage in self.passes for _, _, start, size in stage), default=0.0)

    @property
    def share(self) -> float:
        """The share of the stages' time in the replayed step that no pass filled: the schedule's bubble."""
        total = self.length * len(self.passes)
        busy = sum(size for stage in self.passes for *_, size in stage)
        return 0.0 if total <= 0 else max(0.0, 1 - busy / total)


def pass_seconds(trace: Trace, step: int) -> tuple[dict[tuple[str, int, int], float], str]:
    """Each forward's and backward's own duration in the step, (kind, stage, microbatch) -> seconds, a last stage's
    loss counted in its microbatch's forward (the schedule computes it right after), and the clock it was read from:
    the CPU time of every pass where the trace kept one for each (facts "cpu"), else each span's wall time."""
    spans = computes(trace, step)
    kept = trace.facts.get("cpu") or []
    cpu = {(phase, stage, micro): seconds for stage, rows in enumerate(kept) for at, phase, micro, seconds in rows or []
           if at == step}
    use_cpu = trace.backend != "cuda" and bool(spans) and all((s.phase, s.lane, s.microbatch) in cpu for s in spans)
    seconds: dict[tuple[str, int, int], float] = {}
    for s in spans:
        kind = "B" if s.phase == "backward" else "F"  # a loss is its forward's
        key = (kind, s.lane, s.microbatch)
        seconds[key] = seconds.get(key, 0.0) + (cpu[s.phase, s.lane, s.microbatch] if use_cpu else s.duration)
    return seconds, CPU if use_cpu else DEVICE if trace.backend == "cuda" else WALL


def replay(trace: Trace, step: int) -> Replay | None:
    """The step as it would run with each stage on a device of its own: each pass its own duration (pass_seconds),
    placed in the order torch ran the stage's passes and after what it needs (lay_out); sends take no time. None for
    a step that did not end, or whose orders wait on each other."""
    if not ended(trace, step):
        return None
    seconds, clock = pass_seconds(trace, step)
    orders = [order(trace, step, stage) for stage in range(len(trace.lanes))]
    laid = lay_out(orders, lambda kind, stage, micro: seconds.get((kind, stage, micro), 0.0))
    if laid is None:
        return None
    return Replay([[(kind, micro, start, seconds.get((kind, stage, micro), 0.0)) for kind, micro, start in row]
                   for stage, row in enumerate(laid)], clock)


def held_most(trace: Trace, step: int) -> list[int] | None:
    """Per stage, the most microbatches whose activations it held at once in the step (facts "flight": kept for the
    first and last steps); None when the trace does not say."""
    flight = trace.facts.get("flight")
    if not flight or None in flight:
        return None
    most = [max((row[4] for row in rows if row[0] == step), default=None) for rows in flight]
    return None if None in most else most


def opening_step(trace: Trace) -> int:
    """The step the bubble is read on: the step every engine's views open on (dpviz.analysis.opening_step: the last
    whole step), or the second where that is the first and there is a second, since the first step also sends each
    stage's tensor shapes ahead; in a failed run, the step before the one that failed."""
    from dpviz.analysis.opening_step import opening_step as shared

    step = shared(trace)
    failed = trace.failure.batch if trace.failure is not None else None
    if failed is not None and step == failed and failed > 0:  # a bubble is read on a step that ended: the one before
        return failed - 1
    finished = len(trace.batches) - (trace.failure is not None)
    return 1 if step == 0 and finished > 1 and trace.failure is None else step


def percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def host_cores(trace: Trace) -> int | None:
    """The CPU cores the stages' processes could run on (facts "cores": the most any stage had), or None."""
    cores = [c for c in trace.facts.get("cores") or [] if c]
    return max(cores) if cores else None

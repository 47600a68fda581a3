"""Whether a comparison's settings can show DataParallel's lesson, its GPU 0 as the hub, and what to change if not:
DataParallel's `compare_lesson` part, asked by every comparison it is in (dpviz.analysis.compare).

    lesson = hub_lesson(dp_trace, other_trace)
    lesson.shows        # False at the page's defaults: 2 GPUs, forward only
    lesson.why          # 'on 2 GPUs, GPU 0 serves only one other; forward only, no gradients move'
    lesson.change       # 'turn on training and use 3 GPUs'
    lesson.sentence     # 'Turn on training and use 3 GPUs to see GPU 0 send the model to every other GPU and ...'

GPU 0 is a hub when it serves two other GPUs or more: with one, the link between the two carries the same bytes
either way, and GPU 0's bar can match GPU 1's. Training is what DDP's ranks pay for (the all-reduce of the
gradients) and what DataParallel's GPU 0 pays most for (every replica's gradients back): forward only, a DDP
rank moves nothing to set GPU 0 against. The device count that shows it is found from DataParallel's own
formula (its `moves_at`, torch.chunk's sizes): a batch of few rows leaves devices idle, and idle ones are no spokes.
The page keeps the visitor's settings and says this instead: the Compare figure's title and notes, and the
first sentence under it (dpviz.analysis.compare.comparison).
"""
from __future__ import annotations

from dpviz.analysis.compare import Lesson
from dpviz.analysis.traffic_model import StepSizes
from dpviz.config import LIMITS
from dpviz.trace import Trace

SPOKES = 2  # other GPUs GPU 0 must serve to be a hub


def spokes(sizes: StepSizes, devices: int, moves_at) -> int:
    """How many GPUs besides GPU 0 get rows of a full batch at `devices` (DataParallel's formula)."""
    return sum(1 for sent, received in moves_at(sizes, devices)[1:] if sent or received)


def hub_lesson(dp: Trace, other: Trace) -> Lesson:
    moves_at = dp.spec.part("moves_at")
    sizes = StepSizes.of(dp, other)
    devices, train = len(dp.lanes), dp.config.train
    first = dp.vocabulary.lane_name(dp.lanes[0].id)
    served = spokes(sizes, devices, moves_at)
    if train and served >= SPOKES:
        return Lesson(True)
    problems, changes = [], []
    if served < SPOKES:
        if devices > SPOKES:  # GPUs enough, rows too few: torch.chunk leaves the others idle
            problems.append(f"a batch of {sizes.rows} row{'s' if sizes.rows != 1 else ''} reaches "
                            f"{'no GPU' if served == 0 else 'only one GPU'} besides {first}")
        else:
            problems.append(f"on {devices} GPU{'s' if devices != 1 else ''}, {first} serves "
                            f"{'no other GPU' if served == 0 else 'only one other'}")
        # the fewest GPUs at which torch.chunk gives rows to two others besides GPU 0, within the page's limits
        enough = next((n for n in range(devices + 1, LIMITS["gpus"][1] + 1) if spokes(sizes, n, moves_at) >= SPOKES), None)
        changes.append(f"use {enough} GPUs" if enough is not None else
                       f"use batches of {SPOKES + 1} rows or more on {SPOKES + 1} GPUs or more")
    if not train:
        problems.append("forward only, no gradients move")
        changes.insert(0, "turn on training")
    sees = (f"{first} send the model to every other GPU and take back their gradients, against what each of "
            f"{other.spec.short}'s {other.vocabulary.lane_noun}s sends")
    return Lesson(False, "; ".join(problems), " and ".join(changes), sees, f"show {first} as the hub")


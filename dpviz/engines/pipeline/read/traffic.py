"""What a pipeline moves between its stages: each microbatch's activations to the next stage, and the gradient of
each microbatch's input back to the one before. Point to point, neighbour to neighbour; no parameter ever moves.

    pipeline_model_bytes(trace)   # (parameters, gradients) bytes of the whole model: every stage's own, summed
    pipeline_traffic(trace)       # a Move per step, stage and kind ("activations", "gradients"): sent and received

Every figure comes from the trace's facts: "held" (what each stage held at the end, counted from its own tensors)
and "sent" (the bytes each stage's sends carried, step by step, counted from the tensors it posted). A stage
receives what its neighbour sent: stage s's activations go to stage s + 1, its gradients to stage s - 1. No torch.
"""
from __future__ import annotations

from collections import defaultdict

from dpviz.analysis.traffic import Move
from dpviz.analysis.memory_compare import held_bytes
from dpviz.trace import Trace

# What each send carries, by its phase; and which way it goes (+1: to the next stage, -1: to the one before).
KINDS = {"send_activations": "activations", "send_gradients": "gradients"}
TOWARD = {"send_activations": 1, "send_gradients": -1}


def pipeline_model_bytes(trace: Trace) -> tuple[int | None, int | None]:
    """(parameters, gradients) bytes of the whole model: the stages' own, summed (each stage holds only its layers);
    None where a stage never reported what it held."""
    return held_bytes(trace, "parameters", sharded=True), held_bytes(trace, "gradients", sharded=True)


def sent_bytes(trace: Trace) -> dict[tuple[int, int, str], tuple[int, int]]:
    """(step, stage, send phase) -> (sends, bytes), from facts["sent"], for the steps the trace holds."""
    steps = {b.index for b in trace.batches}
    found: dict[tuple[int, int, str], tuple[int, int]] = {}
    for stage, rows in enumerate(trace.facts.get("sent") or []):
        for step, phase, sends, size in rows or []:
            if step in steps:
                found[(step, stage, phase)] = (sends, size)
    return found


def pipeline_traffic(trace: Trace) -> list[Move]:
    """One Move per step, stage and kind: the bytes the stage sent of its activations (to the next stage) or of
    its input's gradients (to the stage before), and what it received of that kind from its neighbour."""
    stages = len(trace.lanes)
    # (step, stage, kind) -> [sent, received]
    moved: dict[tuple[int, int, str], list[int]] = defaultdict(lambda: [0, 0])
    for (step, stage, phase), (_, size) in sent_bytes(trace).items():
        kind, to = KINDS[phase], stage + TOWARD[phase]
        moved[(step, stage, kind)][0] += size
        if 0 <= to < stages:
            moved[(step, to, kind)][1] += size
    return [Move(step, stage, kind, sent, received, "send/receive", kind == "gradients")
            for (step, stage, kind), (sent, received) in sorted(moved.items()) if sent or received]

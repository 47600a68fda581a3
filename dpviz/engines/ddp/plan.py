"""DistributedDataParallel's plan: every rank holds the whole model, its gradients and the optimizer's state, and
the activations of its own rows; it sends its share of the ring all-reduce (rank 0 the buffers too)."""
from __future__ import annotations

from dpviz.analysis.traffic_model import StepSizes
from dpviz.engines.ddp.read.traffic import moves_at
from dpviz.engines.plan_rules import ModelShape, device, rows_per_device, state_bytes


def plan(shape: ModelShape, gpus: int, optimizer: str) -> list[dict[str, int]]:
    sizes = StepSizes(shape.rows, 0, 0, shape.parameter_bytes + shape.buffer_bytes, shape.gradient_bytes, True)
    sent = [s for s, _ in moves_at(sizes, gpus)]
    rows = rows_per_device(shape.rows, gpus)
    return [device(shape.parameter_bytes, shape.gradient_bytes, state_bytes(shape.params, optimizer),
                   shape.activations(rows[rank]), sent[rank]) for rank in range(gpus)]

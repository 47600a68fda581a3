"""DataParallel's plan: what each GPU holds and sends in one training step of the model, from its shapes.

GPU 0 holds the module (parameters and buffers: its replica shares them), the summed gradients (of every
trainable parameter: replicate's backward gives one forward never used a gradient of zeros) and the optimizer's
state; every other GPU that gets rows holds the replica replicate() copies to it for the step; each
holds the activations of its chunk of the batch, and GPU 0 the gathered output too. What moves is DataParallel's own traffic (read/traffic.py's formula:
chunks, copies and outputs through GPU 0)."""
from __future__ import annotations

from dpviz.analysis.traffic_model import StepSizes
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.engines.dp.read.traffic import moves_at
from dpviz.engines.plan_rules import ModelShape, device, state_bytes


def plan(shape: ModelShape, gpus: int, optimizer: str) -> list[dict[str, int]]:
    module = shape.parameter_bytes + shape.buffer_bytes
    gradients = sum(p.bytes for p in shape.params if p.trainable)
    chunks = chunk_sizes(shape.rows, gpus) + [0] * gpus
    sizes = StepSizes(shape.rows, shape.input_bytes // max(1, shape.rows), shape.output_bytes // max(1, shape.rows),
                      module, gradients, True)
    sent = [s for s, _ in moves_at(sizes, gpus)]
    return [device(parameters=module if gpu == 0 or chunks[gpu] else 0,  # GPU 0's replica shares the module's own
                   gradients=gradients if gpu == 0 else 0,
                   state=state_bytes(shape.params, optimizer, every_trainable=True) if gpu == 0 else 0,
                   activations=shape.activations(chunks[gpu]) + (shape.output_bytes if gpu == 0 else 0),
                   sent=sent[gpu])
            for gpu in range(gpus)]

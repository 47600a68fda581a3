"""A pipeline's plan: each stage, one per device, holds its own layers' parameters, their gradients and its
optimizer's state, and the activations of the microbatches its schedule keeps between their forward and their
backward; it sends each microbatch's activations to the next stage and their gradients back to the one before.

The stages are cut as a run cuts them (layers.split over the layers torch measured, ModelShape.layers), and a model
a run would refuse is refused with the run's own sentence. A stage keeps, per microbatch in flight, what autograd
saved in its layers and the tensors torch's PipelineStage caches for the backward (its input and its output), each
storage once; the schedule sets how many are in flight at once (bubble.schedule_order, the order torch runs them:
GPipe all M, 1F1B min(M, S - s) at stage s)."""
from __future__ import annotations

from dpviz.engines.pipeline.layers import OWN, problem_of, split
from dpviz.engines.pipeline.options import PipelineOptions
from dpviz.engines.pipeline.read.bubble import schedule_order
from dpviz.engines.pipeline.spec import schedule_problem, too_few, uneven
from dpviz.engines.plan_rules import Layer, ModelShape, device, state_bytes


def problem(shape: ModelShape, stages: int, schedule: str, microbatches: int) -> str | None:
    """Why a run would not make `shape` a pipeline of `stages` stages under `schedule` with `microbatches`, in the
    run's own sentence (spec.problem, stages.own_problem); None when it would."""
    if shape.precision != "full":  # its layers are measured in full precision only, as it runs
        return ("a pipeline run computes in its parameters' own dtype (it takes no precision option), so it is "
                "planned with precision full only.")
    name = shape.catalogue
    if name is None:  # one's own: cut as it declares, when it is a sequence at all
        cut = shape.uncut or problem_of(OWN, stages, len(shape.layers))
    else:  # the catalogue's: a model that is no sequence says why; at a real size, its own count of layers
        cut = problem_of(name, stages, len(shape.layers) if shape.layers else None)
    return (too_few(stages) or cut or schedule_problem(schedule, microbatches, stages)
            or uneven(shape.rows, microbatches))


def in_flight(schedule: str, microbatches: int, stages: int, stage: int) -> int:
    """The most microbatches between their forward and their backward at once on `stage`, in torch's order."""
    held = most = 0
    for kind, _ in schedule_order(schedule, stages, microbatches, stage):
        held += 1 if kind == "F" else -1
        most = max(most, held)
    return most


def kept_bytes(layers: list[Layer]) -> int:
    """What a stage of these layers keeps for one example batch until its backward: what autograd saved in each,
    the tensors between them that one saved, and the stage's input and output (PipelineStage caches both)."""
    between = sum(after.input_bytes for before, after in zip(layers, layers[1:])
                  if before.saves_output or after.saves_input)
    return sum(layer.saved_bytes for layer in layers) + between + layers[0].input_bytes + layers[-1].output_bytes


def plan(shape: ModelShape, gpus: int, optimizer: str, *, schedule: str = PipelineOptions.schedule,
         microbatches: int = PipelineOptions.microbatches) -> list[dict]:
    why = problem(shape, gpus, schedule, microbatches)
    if why:
        raise ValueError(why)
    by_name = {p.name: p for p in shape.params}
    share = shape.rows // microbatches / shape.rows  # a microbatch's part of the example batch
    devices = []
    for stage, picked in enumerate(split(len(shape.layers), gpus)):
        layers = [shape.layers[i] for i in picked]
        params = [by_name[name] for name in dict.fromkeys(n for layer in layers for n in layer.params)]
        kept = in_flight(schedule, microbatches, gpus, stage)
        # Every microbatch's activations go on to the next stage, and their gradients back to the one before.
        boundary = (layers[-1].output_bytes if stage < gpus - 1 else 0) + (layers[0].input_bytes if stage else 0)
        planned = device(sum(p.bytes for p in params), sum(p.grad_bytes for p in params), state_bytes(params, optimizer),
                         kept * round(kept_bytes(layers) * share), microbatches * round(boundary * share))
        devices.append({**planned, "layers": [layer.name for layer in layers], "microbatches kept": kept})
    return devices

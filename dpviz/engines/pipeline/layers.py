"""How a model is cut into a pipeline's stages, without torch: how many layers it has, and which stage runs which.

    split(8, 3)                        # [[0, 1, 2], [3, 4, 5], [6, 7]]: layers per stage, as torch.tensor_split cuts
    problem_of("linear", 2)            # why the tutorial's one Linear cannot be two stages
    fitting(3)                         # the catalogue's model with the fewest layers that makes 3 stages

A model is a pipeline when it is a sequence: each layer takes the one tensor the last gave. Which layers a model has
it declares itself (dpviz.catalogue.ModelSpec.pipeline; a user's module by its pipeline_layers, else an
nn.Sequential's children): here they are only counted. Stages take contiguous layers, as evenly by count as
torch.tensor_split cuts L items into S (the first stages one more).
"""
from __future__ import annotations

from dpviz.catalogue import MODEL_SPECS, cut_models

OWN = "your model"  # how a sentence names a module of one's own


def split(layers: int, stages: int) -> list[list[int]]:
    """The layers (by index) of each of `stages` stages: contiguous, as even as torch.tensor_split makes them (the first
    `layers % stages` stages one layer more)."""
    size, extra = divmod(layers, stages)
    cut, first = [], 0
    for stage in range(stages):
        count = size + (stage < extra)
        cut.append(list(range(first, first + count)))
        first += count
    return cut


def problem_of(model: str, stages: int, layers: int | None = None) -> str | None:
    """Why `model` (a catalogue name, or OWN) cannot run as `stages` stages, in one sentence; None when it can.
    `layers`: the layers of the model as built (a user's module's, or a catalogue model's at a real size); None for
    the catalogue's own build, as it declares them."""
    if model != OWN:
        cuts = MODEL_SPECS[model].pipeline
        if not cuts.layers:
            return (f"model {model} {cuts.why_not or 'is no sequence of layers'}, so it cannot be cut into pipeline "
                    f"stages; use {_choices(stages)}.")
        layers = cuts.count if layers is None else layers
    if layers < stages:
        named = model if model == OWN else f"model {model}"
        return (f"{named} has {layers} layers, so it cannot be cut into {stages} stages of at least one layer "
                f"each; use {'at most ' + str(layers) if model == OWN else _choices(stages) + ', or fewer'} stages.")
    return None


def fitting(stages: int) -> tuple[str, int]:
    """The catalogue's model with the fewest layers that still makes `stages` stages (the smallest change), else the
    one with the most; and its count of layers."""
    counts = {name: spec.pipeline.count for name, spec in cut_models().items()}
    fits = [name for name, count in counts.items() if count >= stages]
    name = min(fits, key=counts.get) if fits else max(counts, key=counts.get)
    return name, counts[name]


def _choices(stages: int) -> str:
    fits = [f"{name} ({spec.pipeline.count} layers)" for name, spec in cut_models().items()
            if spec.pipeline.count >= stages]
    return " or ".join(fits) if fits else "a model with more layers"

"""How a model is cut into a pipeline's stages, without torch: its layers, by name, and which stage runs which.

    LAYERS["mlp"]                      # ('net.0', 'net.1', 'net.2', 'net.3'): what a stage is cut from
    split(8, 3)                        # [[0, 1, 2], [3, 4, 5], [6, 7]]: layers per stage, as torch.tensor_split cuts
    problem_of("linear", 2)            # why the tutorial's one Linear cannot be two stages

A model is a pipeline when it is a sequence: each layer takes the one tensor the last gave. The catalogue's MLP
and CNN are nn.Sequential (each child a layer: a ReLU too, a layer with nothing to learn); the transformer is its
token and position embeddings, then each block, then the norm and head on the last token. Stages take
contiguous layers, as evenly by count as torch.tensor_split cuts L items into S (the first stages one more); a user's
nn.Sequential the same, by its children. The other models are one step that cannot be cut (a Linear, a GRU), or
return or change what a sequence does not pass on (a loss, a counter).
"""
from __future__ import annotations

# The catalogue's models that are sequences, as their layers: the modules (or groups of modules) each stage takes.
LAYERS: dict[str, tuple[str, ...]] = {
    "mlp": ("net.0", "net.1", "net.2", "net.3"),
    "cnn": ("features.0", "features.1", "features.2", "features.3", "features.4", "features.5", "features.6", "head"),
    "transformer": ("embed + position", "blocks.0", "blocks.1", "blocks.2", "norm + head"),
}
WHY_NOT = {  # why a catalogue model is not cut into stages, as a clause after its name
    "linear": "is one nn.Linear, a single layer",
    "gru": "is one GRU, whose steps run inside the layer",
    "gru_dim1": "is one GRU, whose steps run inside the layer",
    "loss": "returns its loss from forward, which a pipeline's last stage computes itself",
    "counter": "changes its own state in forward",
    "unused": "leaves a layer unused, so it is no sequence",
}


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
    """Why `model` cannot run as `stages` stages, in one sentence; None when it can. `layers`: a user's
    nn.Sequential's children (None for the catalogue's)."""
    if layers is None:
        if model not in LAYERS:
            return (f"model {model} {WHY_NOT.get(model, 'is no sequence of layers')}, so it cannot be cut into pipeline "
                    f"stages; use {_choices(stages)}.")
        layers = len(LAYERS[model])
    if layers < stages:
        named = model if model == "your model" else f"model {model}"
        return (f"{named} has {layers} layers, so it cannot be cut into {stages} stages of at least one layer "
                f"each; use {'at most ' + str(layers) if model == 'your model' else _choices(stages) + ', or fewer'} stages.")
    return None


def fitting(stages: int) -> str:
    """The catalogue's model with the fewest layers that still makes `stages` stages (the smallest change)."""
    return min((name for name, layers in LAYERS.items() if len(layers) >= stages), key=lambda name: len(LAYERS[name]),
               default="cnn")


def _choices(stages: int) -> str:
    fits = [f"{name} ({len(layers)} layers)" for name, layers in LAYERS.items() if len(layers) >= stages]
    return " or ".join(fits) if fits else "a model with more layers"

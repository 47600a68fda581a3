"""A model cut into a pipeline's stages: the modules one stage runs, in order, taken from the whole model built
from the run's seed (every rank builds it whole, as DDP's ranks do, and keeps its own layers).

    stage_module(model, "mlp", stages=2, stage=1)     # net.2 and net.3, the model's own modules, by their names

The transformer's first and last layers are not modules of their own in the model (its forward adds the position
embedding, and its head reads the last token): here they are, holding the model's own embeddings and head, so
that the stages together compute exactly what the model's forward does.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dpviz.engines.pipeline.layers import LAYERS, problem_of, split
from dpviz.engines.pipeline.spec import uneven

NOT_ONE_TENSOR = ("your batch is not one tensor; a pipeline's first stage takes the one tensor of rows, and each stage "
                  "hands the next the one tensor it made, so the batch must be a tensor.")


class TokensIn(nn.Module):
    """The transformer's first layer: token embedding plus position embedding (its forward's first line)."""

    def __init__(self, embed: nn.Embedding, position: nn.Embedding):
        super().__init__()
        self.embed, self.position = embed, position

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.embed(input) + self.position(torch.arange(input.shape[1], device=input.device))


class LastTokenOut(nn.Module):
    """The transformer's last layer: its norm and head on the last token (its forward's last line)."""

    def __init__(self, norm: nn.LayerNorm, head: nn.Linear):
        super().__init__()
        self.norm, self.head = norm, head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(x[:, -1]))


class Layers(nn.Module):
    """A stage: some of a model's layers, run one after another. Each module is registered at the path it has in the
    whole model, so the stage's parameters, buffers and state_dict keep the model's own names ("net.2.weight")."""

    def __init__(self, model: nn.Module, layers: list[tuple[str, nn.Module]]):
        super().__init__()
        own = {id(module): path for path, module in model.named_modules() if path}
        for _, layer in layers:  # a layer of the model's, or a wrapper whose modules are the model's
            for module in ([layer] if id(layer) in own else list(layer.children())):
                self._register(own[id(module)], module)
        object.__setattr__(self, "steps", [layer for _, layer in layers])  # run in order, registered above
        object.__setattr__(self, "names", [name for name, _ in layers])

    def _register(self, path: str, module: nn.Module) -> None:
        parent, *parts = self, *path.split(".")
        for part in parts[:-1]:
            if not hasattr(parent, part):
                parent.add_module(part, nn.Module())
            parent = getattr(parent, part)
        parent.add_module(parts[-1], module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.steps:
            x = layer(x)
        return x


def layers_of(model: nn.Module, name: str) -> list[tuple[str, nn.Module]]:
    """The model's layers, in order, each with its name: the catalogue's as dpviz.engines.pipeline.layers lists
    them, a user's nn.Sequential by its children."""
    if name == "transformer":
        return [(LAYERS[name][0], TokensIn(model.embed, model.position)),
                *[(f"blocks.{i}", block) for i, block in enumerate(model.blocks)],
                (LAYERS[name][-1], LastTokenOut(model.norm, model.head))]
    if name in LAYERS:
        modules = dict(model.named_modules())
        return [(layer, modules[layer]) for layer in LAYERS[name]]
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"your model is a {type(model).__name__}, not an nn.Sequential, so a pipeline cannot tell "
                         "its layers apart; put the layers it runs one after another in an nn.Sequential.")
    return [(child, module) for child, module in model.named_children()]


def own_problem(work: Any, scattered: torch.Tensor | None) -> str | None:
    """Why a user's module and batch cannot run as this pipeline (a sentence), before any stage starts: a module
    that is not a sequence of layers, fewer layers than stages, or a batch of more than one tensor (a stage hands
    the next the one tensor it made)."""
    stages = work.config.gpus
    try:
        layers = layers_of(work.model, "your model")
    except ValueError as error:
        return str(error)
    why = problem_of("your model", stages, len(layers))
    if why:
        return why
    if len(work.args) != 1 or work.kwargs or not isinstance(work.args[0], torch.Tensor):
        return NOT_ONE_TENSOR
    return uneven(work.config.batch_size, work.config.microbatches)


def plan_layers(model: nn.Module, example: Any, catalogue: str | None) -> list[tuple[str, nn.Module]]:
    """The layers a plan measures one by one (dpviz.engines.workload.shapes), as the stages take them: those of
    layers_of; ValueError (the sentence a run would say) for a module that is no sequence or a batch that is not
    one tensor. How many stages they make is the plan's to judge (plan.py)."""
    layers = layers_of(model, catalogue if catalogue in LAYERS else "your model")
    if not isinstance(example, torch.Tensor):
        raise ValueError(NOT_ONE_TENSOR)
    return layers


def stage_module(model: nn.Module, name: str, stages: int, stage: int) -> tuple[Layers, list[str]]:
    """Stage `stage`'s layers of `model` (the model's own modules, not copies), and their names."""
    layers = layers_of(model, name)
    why = problem_of("your model" if name not in LAYERS else name, stages, len(layers))
    if why:  # a user's nn.Sequential is counted only now, when it is built
        raise ValueError(why)
    mine = [layers[i] for i in split(len(layers), stages)[stage]]
    return Layers(model, mine), [layer for layer, _ in mine]

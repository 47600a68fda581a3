"""A model cut into a pipeline's stages: the modules one stage runs, in order, taken from the whole model built
from the run's seed (every rank builds it whole, as DDP's ranks do, and keeps its own layers).

    stage_module(model, "mlp", stages=2, stage=1)     # net.2 and net.3, the model's own modules, by their names

Which layers a model has is its own declaration (dpviz.engines.workload.declared: the catalogue's, or a user's
`pipeline_layers`, else an nn.Sequential's children); a layer that is a group of modules (a transformer's embeddings
added) is built by the model, holding its own modules, so that the stages together compute what its forward does.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dpviz.engines.pipeline.layers import problem_of, split
from dpviz.engines.pipeline.spec import uneven
from dpviz.engines.workload import declared

NOT_ONE_TENSOR = ("your batch is not one tensor; a pipeline's first stage takes the one tensor of rows, and each stage "
                  "hands the next the one tensor it made, so the batch must be a tensor.")
OWN = "your model"  # how a sentence names a module of one's own


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


def layers_of(model: nn.Module, catalogue: str | None) -> list[tuple[str, nn.Module]]:
    """The model's layers, in order, each with its name, as it declares them (`catalogue`: the catalogue's name for
    it, None for a module of one's own). ValueError (one sentence) for a model that declares none."""
    return declared.layers(model, catalogue)


def own_problem(work: Any, scattered: torch.Tensor | None) -> str | None:
    """Why a user's module and batch cannot run as this pipeline (a sentence), before any stage starts: a module
    that is not a sequence of layers, fewer layers than stages, or a batch of more than one tensor (a stage hands
    the next the one tensor it made)."""
    stages = work.config.gpus
    try:
        layers = layers_of(work.model, None)
    except ValueError as error:
        return str(error)
    why = problem_of(OWN, stages, len(layers))
    if why:
        return why
    if len(work.args) != 1 or work.kwargs or not isinstance(work.args[0], torch.Tensor):
        return NOT_ONE_TENSOR
    return uneven(work.config.batch_size, work.config.microbatches)


def plan_layers(model: nn.Module, example: Any, catalogue: str | None) -> list[tuple[str, nn.Module]]:
    """The layers a plan measures one by one (dpviz.engines.workload.shapes), as the stages take them: those of
    layers_of; ValueError (the sentence a run would say) for a module that is no sequence or a batch that is not
    one tensor. How many stages they make is the plan's to judge (plan.py)."""
    layers = layers_of(model, catalogue)
    if not isinstance(example, torch.Tensor):
        raise ValueError(NOT_ONE_TENSOR)
    return layers


def stage_module(model: nn.Module, name: str, stages: int, stage: int) -> tuple[Layers, list[str]]:
    """Stage `stage`'s layers of `model` (the model's own modules, not copies), and their names; `name` is the run's
    model (the catalogue's name, or dpviz.catalogue.OWN)."""
    from dpviz.catalogue import OWN as OWN_MODEL

    catalogue = None if name == OWN_MODEL else name
    layers = layers_of(model, catalogue)
    why = problem_of(OWN if catalogue is None else catalogue, stages, len(layers))
    if why:  # a user's module is counted only now, when it is built
        raise ValueError(why)
    mine = [layers[i] for i in split(len(layers), stages)[stage]]
    return Layers(model, mine), [layer for layer, _ in mine]

"""The model and data of PyTorch's DataParallel tutorial (beginner_source/blitz/data_parallel_tutorial.py),
generalised to the models of dpviz.engines.workload.models and the input forms of dpviz.engines.workload.input_forms.

    model, loader = build(config)          # what DataParallel wraps, and the tutorial's DataLoader
    args, kwargs = call(config, data, ids)  # one batch as the model takes it
"""
from __future__ import annotations

from array import array
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from dpviz.engines.workload import input_forms as inputs
from dpviz.catalogue import MODEL_SPECS, row_shape
from dpviz.config import RunConfig, batch_dim

from dpviz.engines.workload.batch_sampler import ShuffledBatches
from dpviz.engines.workload.models import build_model, random_rows
from dpviz.engines.workload.seeding import seeded


class RandomDataset(Dataset):
    """`length` random rows of shape `size` (or `rows` given); item i is (row i, i) so a run can follow every row."""

    def __init__(self, size: int | tuple[int, ...], length: int, generator: torch.Generator | None = None,
                 rows: torch.Tensor | None = None):
        self.len = length
        shape = (size,) if isinstance(size, int) else tuple(size)
        self.data = rows if rows is not None else torch.randn(length, *shape, generator=generator)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.data[index], index

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        # A whole batch in one indexing op: a million rows would otherwise cost a million
        # __getitem__ calls and a stack, far more than the forwards being shown.
        index = index_tensor(indices)
        return self.data[index], index

    def __len__(self) -> int:
        return self.len


def index_tensor(indices: list[int]) -> torch.Tensor:
    """torch.tensor(indices, dtype=torch.long), in a quarter of the time: torch.tensor looks at each Python int
    of the list on its own (16 us for a batch of 256 here), an array of int64 is one buffer torch takes whole.
    The tensor keeps the array as its memory, so it cannot be resized; nothing resizes a batch's row numbers."""
    if not indices:  # frombuffer refuses an empty buffer
        return torch.tensor(indices, dtype=torch.long)
    return torch.frombuffer(array("q", indices), dtype=torch.long)


def _already_batched(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch


def _core(config: RunConfig, seed: int) -> nn.Module:
    with seeded(seed):  # the weights torch.manual_seed(seed) would give, without touching the global RNG
        core, _ = build_model(config.model, config.input_size, config.output_size)
    return core


def build(config: RunConfig) -> tuple[nn.Module, DataLoader]:
    """The model (taking `config.inputs`) and loader for `config`; the same seed gives the same
    weights, data and order."""
    generator = torch.Generator().manual_seed(config.seed)
    rows = random_rows(config.model, config.input_size, config.data_size, generator)
    dataset = RandomDataset(row_shape(config.model, config.input_size), config.data_size, rows=rows)
    model = inputs.wrap(config.inputs, _core(config, config.seed), batch_dim(config.model))
    order = torch.Generator().manual_seed(config.seed + 1)
    # DataLoader(dataset, batch_size, shuffle, generator=order)'s batches, each epoch's order drawn in one call.
    loader = DataLoader(
        dataset,
        batch_sampler=ShuffledBatches(config.data_size, config.batch_size, config.shuffle, order),
        generator=order,
        collate_fn=_already_batched,
    )
    return model, loader


def model_input(config: RunConfig, data: torch.Tensor) -> torch.Tensor:
    """A loader batch laid out as the model takes it: time first for `gru_dim1`, else as it is."""
    return data.transpose(0, 1) if batch_dim(config.model) == 1 else data


def call(config: RunConfig, data: torch.Tensor, ids: list[int]) -> tuple[tuple, dict[str, Any]]:
    """One loader batch as the positional and keyword arguments of the model's call."""
    return inputs.call_args(config.inputs, model_input(config, data), ids, batch_dim(config.model))


LEARNING_RATE = 0.1
MOMENTUM = 0.9  # momentum keeps one buffer per parameter: optimiser state that lives on device 0
ADAM_LEARNING_RATE = 0.01  # Adam's steps are about lr in size whatever the gradient's scale


def training_parts(config: RunConfig, model: nn.Module) -> tuple[nn.Module, torch.optim.Optimizer]:
    """For a training run: a teacher that gives each input its target, and an SGD optimiser.

    The tutorial only runs forward; training regresses the model onto a fixed random teacher of the
    same architecture with MSE, which is enough to show the backward pass, the summed gradients and
    the step. The teacher computes targets batch by batch: a table of targets would be
    data_size x output_size numbers, 4 GB for a million rows of 1,024 outputs.
    """
    kind, settings = optimizer_of(config)
    return teacher_of(config), kind(model.parameters(), **settings)


def teacher_of(config: RunConfig) -> nn.Module:
    """The fixed random teacher whose outputs are the training targets."""
    return _core(config, config.seed + 2).requires_grad_(False).eval()


def optimizer_of(config: RunConfig) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """The optimiser's class and settings: what each rank builds, or hands to an engine that shards it.
    SGD with momentum keeps one buffer per parameter; Adam keeps two (its moments), twice the parameters."""
    if config.optimizer == "adam":
        return torch.optim.Adam, {"lr": ADAM_LEARNING_RATE}
    return torch.optim.SGD, {"lr": LEARNING_RATE, "momentum": MOMENTUM}


def loss_of(config: RunConfig, output: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
    """The training loss: MSE against the teacher, or, for a model that returns its own loss, the mean
    of what DataParallel gathered (one loss per replica), as code written for one GPU would do."""
    if MODEL_SPECS[config.model].returns_loss:
        return output.mean()
    return F.mse_loss(output, target.to(output.device))


class Tutorial:
    """The catalogue's model and input form as a run's workload: what every engine asks of one (the user's own
    module answers the same questions: dpviz.engines.workload.own.OwnWorkload)."""

    def __init__(self, config: RunConfig):
        self.config = config
        self.facts_kind = MODEL_SPECS[config.model].facts  # what this model shows beyond its outputs
        self.returns_loss = MODEL_SPECS[config.model].returns_loss
        self.argument_names = inputs.POSITIONAL[config.inputs]

    def build(self) -> tuple[nn.Module, DataLoader]:
        return build(self.config)

    def call(self, data: torch.Tensor, ids: list[int]) -> tuple[tuple, dict[str, Any]]:
        return call(self.config, data, ids)

    def loaded_bytes(self, data: torch.Tensor, args: tuple, kwargs: dict) -> int:
        return data.numel() * data.element_size()

    def training_parts(self, model: nn.Module) -> tuple[nn.Module, torch.optim.Optimizer]:
        return training_parts(self.config, model)

    def teacher(self) -> nn.Module:
        """What gives each input its target (an engine that builds its own optimizer asks for this alone)."""
        return teacher_of(self.config)

    def target(self, teacher: nn.Module, x: torch.Tensor, args: tuple, kwargs: dict) -> torch.Tensor | None:
        with torch.no_grad():
            return None if self.returns_loss else teacher(x)

    def loss(self, output: torch.Tensor, target: torch.Tensor | None) -> torch.Tensor:
        return loss_of(self.config, output, target)

    def facts(self) -> dict[str, Any]:
        return {}


def workload(config: RunConfig, own: Any = None) -> Any:
    """The run's workload: the user's own (already built) when given, else the catalogue's for `config`."""
    return own if own is not None else Tutorial(config)

"""The model and data of PyTorch's DataParallel tutorial (beginner_source/blitz/data_parallel_tutorial.py)."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from .config import RunConfig


class RandomDataset(Dataset):
    """`length` random rows of `size` features; item i is (row i, i) so a run can follow every row."""

    def __init__(self, size: int, length: int, generator: torch.Generator | None = None):
        self.len = length
        self.data = torch.randn(length, size, generator=generator)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.data[index], index

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        # A whole batch in one indexing op: a million rows would otherwise cost a million
        # __getitem__ calls and a stack, far more than the forwards being shown.
        index = torch.tensor(indices, dtype=torch.long)
        return self.data[index], index

    def __len__(self) -> int:
        return self.len


def _already_batched(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch


class Model(nn.Module):
    """The tutorial's model: one nn.Linear that, when verbose, prints the sizes each replica sees."""

    def __init__(self, input_size: int, output_size: int, verbose: bool = False):
        super().__init__()
        self.fc = nn.Linear(input_size, output_size)
        self.verbose = verbose

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        output = self.fc(input)
        if self.verbose:
            print("\tIn Model: input size", input.size(), "output size", output.size())
        return output


def build(config: RunConfig) -> tuple[Model, DataLoader]:
    """The model and loader for `config`; the same seed gives the same weights, data and order."""
    generator = torch.Generator().manual_seed(config.seed)
    dataset = RandomDataset(config.input_size, config.data_size, generator)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = Model(config.input_size, config.output_size)
    loader = DataLoader(
        dataset,
        batch_size=config.batch_size,
        shuffle=config.shuffle,
        generator=torch.Generator().manual_seed(config.seed + 1),
        collate_fn=_already_batched,
    )
    return model, loader


LEARNING_RATE = 0.1
MOMENTUM = 0.9  # momentum keeps one buffer per parameter: optimiser state that lives on device 0


def training_parts(config: RunConfig, model: nn.Module) -> tuple[nn.Module, torch.optim.Optimizer]:
    """For a training run: a teacher that gives each input row its target, and an SGD optimiser.

    The tutorial only runs forward; training regresses the model onto a fixed random linear teacher
    with MSE, which is enough to show the backward pass, the summed gradients and the step. The
    teacher computes targets batch by batch: a table of targets would be data_size x output_size
    numbers, 4 GB for a million rows of 1,024 outputs.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed + 2)
        teacher = nn.Linear(config.input_size, config.output_size).requires_grad_(False)
    return teacher, torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)

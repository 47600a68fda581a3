"""The tutorial's DataLoader batches, with each epoch's order drawn in one call.

    DataLoader(dataset, batch_sampler=ShuffledBatches(n, batch_size, shuffle, generator), generator=generator)

gives exactly the batches of `DataLoader(dataset, batch_size, shuffle=shuffle, generator=generator)` (drop_last
off), and leaves `generator` in the same state after each epoch. torch's BatchSampler takes the indices of its
RandomSampler one Python int at a time; a million rows made that a tenth of a recorded run. Here the one
`torch.randperm` that RandomSampler draws is turned into a list once and cut into batches.
tests/test_batch_sampler.py holds both against each other.
"""
from __future__ import annotations

from typing import Iterator

import torch
from torch.utils.data import Sampler


class ShuffledBatches(Sampler[list[int]]):
    """BatchSampler(RandomSampler(range(n), generator=generator) or SequentialSampler, batch_size, drop_last=False)."""

    def __init__(self, length: int, batch_size: int, shuffle: bool, generator: torch.Generator | None):
        if shuffle and generator is None:
            raise ValueError("a shuffled order needs a generator of its own (the global RNG is never drawn from)")
        self.length, self.batch_size, self.shuffle, self.generator = length, batch_size, shuffle, generator

    def __iter__(self) -> Iterator[list[int]]:
        # A generator function, as RandomSampler's: nothing is drawn until the first batch is asked for, after
        # the DataLoader's iterator has drawn its base seed from the same generator.
        n, size = self.length, self.batch_size
        if not self.shuffle:
            for start in range(0, n, size):
                yield list(range(start, min(start + size, n)))
            return
        order = torch.randperm(n, generator=self.generator).tolist()
        # RandomSampler, asked past its last index, draws a second permutation and yields none of it (its
        # num_samples % n == 0). BatchSampler asks while filling a short last batch, or after a full one: the
        # same draw at the same moment leaves the generator where torch's leaves it.
        whole = n - n % size
        for start in range(0, whole, size):
            yield order[start:start + size]
        torch.randperm(n, generator=self.generator)
        if whole < n:
            yield order[whole:]

    def __len__(self) -> int:
        return (self.length + self.batch_size - 1) // self.batch_size

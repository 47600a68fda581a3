"""DistributedSampler's arithmetic in plain Python, against torch's own DistributedSampler and DataLoader."""
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from dpviz.engines.ddp.sampler_rows import padded_order, padding, per_rank_batch, rank_indices, step_rows, steps

CASES = [(100, 30, 2), (100, 30, 3), (100, 30, 4), (100, 30, 8), (10, 4, 3), (2, 1, 4), (5, 2, 4), (7, 3, 8),
         (1, 1, 16), (1000, 256, 16), (100, 100, 1), (33, 7, 5)]


def torch_indices(size: int, ranks: int, shuffle: bool = False, seed: int = 0) -> list[list[int]]:
    return [list(DistributedSampler(range(size), num_replicas=ranks, rank=r, shuffle=shuffle, seed=seed))
            for r in range(ranks)]


@pytest.mark.parametrize("size, batch, ranks", CASES)
def test_each_rank_gets_what_torch_gives_it(size, batch, ranks):
    order = list(range(size))
    assert [rank_indices(order, r, ranks) for r in range(ranks)] == torch_indices(size, ranks)


@pytest.mark.parametrize("size, batch, ranks", CASES)
def test_shuffled_order_is_padded_and_strided_as_torch_does(size, batch, ranks):
    generator = torch.Generator().manual_seed(7)
    order = torch.randperm(size, generator=generator).tolist()  # what DistributedSampler draws for seed 7, epoch 0
    assert [rank_indices(order, r, ranks) for r in range(ranks)] == torch_indices(size, ranks, shuffle=True, seed=7)


@pytest.mark.parametrize("size, batch, ranks", CASES)
def test_steps_and_rows_per_step_are_the_dataloaders(size, batch, ranks):
    loader = DataLoader(range(size), batch_size=per_rank_batch(batch, ranks),
                        sampler=DistributedSampler(range(size), num_replicas=ranks, rank=ranks - 1, shuffle=False))
    sizes = [len(b) for b in loader]
    assert step_rows(size, batch, ranks) == sizes and steps(size, batch, ranks) == len(sizes)


@pytest.mark.parametrize("size, batch, ranks", CASES)
def test_the_padded_list_is_rebuilt_from_what_the_ranks_loaded(size, batch, ranks):
    per_rank = torch_indices(size, ranks)
    rebuilt = padded_order(per_rank, ranks)
    assert rebuilt[:size] == list(range(size))
    assert len(rebuilt) - size == padding(size, ranks) and rebuilt[size:] == (list(range(size)) * ranks)[:padding(size, ranks)]


def test_the_global_batch_is_per_rank_batch_times_ranks():
    assert per_rank_batch(30, 4) == 8 and per_rank_batch(30, 3) == 10 and per_rank_batch(1, 16) == 1

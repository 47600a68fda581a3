"""ShuffledBatches against torch's own DataLoader batching: the same batches, the generator left alike."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from dpviz.engines.workload.batch_sampler import ShuffledBatches


def _loaders(n: int, batch_size: int, shuffle: bool, seed: int) -> tuple[DataLoader, DataLoader, torch.Generator, torch.Generator]:
    ours, torchs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    rows = list(range(n))
    mine = DataLoader(rows, batch_sampler=ShuffledBatches(n, batch_size, shuffle, ours), generator=ours,
                      collate_fn=list)
    theirs = DataLoader(rows, batch_size=batch_size, shuffle=shuffle, generator=torchs, collate_fn=list)
    return mine, theirs, ours, torchs


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("n, batch_size", [(100, 30), (90, 30), (1, 1), (5, 8), (1000, 1), (257, 256), (10, 10)])
def test_the_same_batches_as_torchs_batch_sampler_epoch_after_epoch(n, batch_size, shuffle):
    mine, theirs, ours, torchs = _loaders(n, batch_size, shuffle, seed=n + batch_size)
    for _ in range(3):  # each epoch draws anew, from a generator each leaves in the same state
        assert list(mine) == list(theirs)
        assert torch.equal(ours.get_state(), torchs.get_state())
    assert len(mine) == len(theirs)


@pytest.mark.parametrize("n, batch_size", [(100, 30), (90, 30)])
def test_the_generator_moves_as_torchs_does_batch_by_batch(n, batch_size):
    """Drawn at the same moments: the first order when the first batch is asked for, the spare one while
    the last short batch fills (or after the last full batch)."""
    mine, theirs, ours, torchs = _loaders(n, batch_size, True, seed=3)
    for a, b in zip(iter(mine), iter(theirs)):
        assert a == b and torch.equal(ours.get_state(), torchs.get_state())


def test_a_shuffled_order_needs_a_generator_of_its_own():
    with pytest.raises(ValueError, match="generator"):
        ShuffledBatches(10, 3, True, None)


@pytest.mark.parametrize("shuffle", [True, False])
def test_the_tutorials_loader_gives_what_torchs_dataloader_collates(shuffle):
    """Rows and row numbers of each batch, taken whole (__getitems__), as torch's default DataLoader gives them
    row by row and collates: the same values, dtypes and shapes."""
    from dpviz.config import RunConfig
    from dpviz.engines.workload import tutorial_data as tutorial

    config = RunConfig(batch_size=30, data_size=100, shuffle=shuffle)
    _, mine = tutorial.build(config)
    row_by_row = [mine.dataset[i] for i in range(len(mine.dataset))]  # a list has no __getitems__
    theirs = DataLoader(row_by_row, batch_size=30, shuffle=shuffle,
                        generator=torch.Generator().manual_seed(config.seed + 1))
    for (data, ids), (expected_data, expected_ids) in zip(mine, theirs, strict=True):
        assert torch.equal(data, expected_data) and torch.equal(ids, expected_ids)
        assert ids.dtype == expected_ids.dtype == torch.long and ids.tolist() == expected_ids.tolist()

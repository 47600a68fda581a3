"""Which dataset rows each rank loads: DistributedSampler's arithmetic, in plain Python (no torch).

    per_rank_batch(30, 4)        # 8: each rank's DataLoader batch_size for a global batch of 30
    steps(100, 30, 4)            # 4: 25 rows per rank, in batches of 8, 8, 8, 1
    padded_order(layout, 4)      # the sampler's padded list L, rebuilt from what each rank loaded
    rank_loads(100, 30, 4)       # [[8, 8, 8, 8], [8, 8, 8, 8], [8, 8, 8, 8], [1, 1, 1, 1]]: rows per step per rank

DistributedSampler (torch/utils/data/distributed.py) pads the (shuffled) list of N indices by repeating
its start until it divides evenly by W, then gives rank r the indices L[r], L[r + W], L[r + 2W], ...
Every rank so gets ceil(N / W) rows and the same number of steps: the padding rows are what keeps the
ranks in step (a rank with one step more would wait in an all-reduce the others never join).
"""
from __future__ import annotations


def per_rank_batch(batch_size: int, ranks: int) -> int:
    """Each rank's DataLoader batch_size when `batch_size` is the global batch: ceil(batch_size / ranks)."""
    return -(-batch_size // ranks)


def rows_per_rank(data_size: int, ranks: int) -> int:
    """`num_samples` of DistributedSampler with drop_last=False: ceil(N / W)."""
    return -(-data_size // ranks)


def steps(data_size: int, batch_size: int, ranks: int) -> int:
    """Steps of one epoch: every rank's loader has this many batches."""
    return -(-rows_per_rank(data_size, ranks) // per_rank_batch(batch_size, ranks))


def step_rows(data_size: int, batch_size: int, ranks: int) -> list[int]:
    """Rows each rank loads in each step (the last step may be short)."""
    total, batch = rows_per_rank(data_size, ranks), per_rank_batch(batch_size, ranks)
    return [min(batch, total - start) for start in range(0, total, batch)]


def padding(data_size: int, ranks: int) -> int:
    """Rows the sampler repeats so that every rank gets as many: total_size - N."""
    return rows_per_rank(data_size, ranks) * ranks - data_size


def rank_indices(order: list[int], rank: int, ranks: int) -> list[int]:
    """Rank `rank`'s indices, given the sampler's unpadded order (range(N), or the shuffled permutation)."""
    total = rows_per_rank(len(order), ranks) * ranks
    padded = list(order)
    while len(padded) < total:  # whole repeats when the padding exceeds N (N=2, W=4 gives 0,1,0,1)
        padded += order[: total - len(padded)]
    return padded[rank:total:ranks]


def padded_order(per_rank: list[list[int]], ranks: int) -> list[int]:
    """The sampler's padded list L rebuilt from each rank's indices in order: L[r + k*W] = rank r's k-th."""
    length = len(per_rank[0]) if per_rank else 0
    return [per_rank[r][k] for k in range(length) for r in range(ranks)]


def rank_shares(data_size: int, ranks: int, *, drop_last: bool = False, uneven: bool = False) -> list[int]:
    """Rows each rank loads in one epoch: DistributedSampler's equal `num_samples` (padded up, or cut
    down with drop_last), or, for data split by hand into contiguous shards, N // W and one more for
    the first N % W ranks."""
    if uneven:
        return [data_size // ranks + (rank < data_size % ranks) for rank in range(ranks)]
    if drop_last and data_size % ranks:
        return [data_size // ranks] * ranks
    return [rows_per_rank(data_size, ranks)] * ranks


def shard_start(data_size: int, ranks: int, rank: int) -> int:
    """Where rank `rank`'s contiguous shard starts when the data is split by hand."""
    return sum(rank_shares(data_size, ranks, uneven=True)[:rank])


def rank_loads(data_size: int, batch_size: int, ranks: int, *, batch_per_process: bool = False, drop_last: bool = False,
               uneven: bool = False, epochs: int = 1) -> list[list[int]]:
    """Rows each rank loads in every step of the run, epoch after epoch: rank_loads(...)[step][rank] (0 when a rank
    has run out of batches, which only data split by hand can make happen)."""
    batch = batch_size if batch_per_process else per_rank_batch(batch_size, ranks)
    shares = rank_shares(data_size, ranks, drop_last=drop_last, uneven=uneven)
    longest = max(-(-share // batch) for share in shares)
    epoch = [[max(0, min(batch, share - step * batch)) for share in shares] for step in range(longest)]
    return epoch * epochs


def sampler_indices(order: list[int], rank: int, ranks: int, drop_last: bool = False) -> list[int]:
    """DistributedSampler's indices for `rank`, given its (shuffled or plain) order of the dataset."""
    if drop_last and len(order) % ranks:
        total = (len(order) // ranks) * ranks
        return order[:total][rank:total:ranks]
    return rank_indices(order, rank, ranks)

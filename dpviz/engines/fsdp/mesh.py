"""FSDP over tensor parallelism: the run's two-dimensional mesh, as torchtitan builds it, in plain integers (no torch:
the readers and the checks use it too).

    DIMS                              # ("dp_shard", "tp"): init_device_mesh's mesh_dim_names, outer first
    degrees(4, 2)                     # (2, 2): dp_shard × tp = the ranks
    coordinates(3, 2)                 # (1, 1): rank 3 is dp_shard 1, tp 1
    groups(4, 2)                      # {"dp_shard": [[0, 2], [1, 3]], "tp": [[0, 1], [2, 3]]}

init_device_mesh lays the ranks out row-major over (dp_shard, tp): rank = i·T + j. So the ranks of one tensor-parallel
group are neighbours (they all-reduce activations inside every layer, the traffic that wants the fastest link), and
each dp_shard group takes one rank of every tensor-parallel group (FSDP all-gathers and reduce-scatters there).
"""
from __future__ import annotations

DP_SHARD, TP = "dp_shard", "tp"
DIMS = (DP_SHARD, TP)


def degrees(ranks: int, tp: int) -> tuple[int, int]:
    """(dp_shard, tp): FSDP's degree is what tensor parallelism leaves of the ranks."""
    return ranks // tp, tp


def coordinates(rank: int, tp: int) -> tuple[int, int]:
    """(dp_shard index, tp index) of `rank` on the mesh."""
    return divmod(rank, tp)


def groups(ranks: int, tp: int) -> dict[str, list[list[int]]]:
    """The ranks of each group of each mesh dimension: those that share the other coordinate."""
    dp, _ = degrees(ranks, tp)
    return {DP_SHARD: [[i * tp + j for i in range(dp)] for j in range(tp)],
            TP: [[i * tp + j for j in range(tp)] for i in range(dp)]}


def group_of(rank: int, ranks: int, tp: int, dim: str) -> list[int]:
    """The ranks `rank` runs `dim`'s collectives with (itself included)."""
    return next(group for group in groups(ranks, tp)[dim] if rank in group)


def rank_words(rank: int, tp: int) -> str:
    """'dp_shard 1, tp 0': a rank by its mesh coordinates, in the names init_device_mesh gives the dimensions."""
    i, j = coordinates(rank, tp)
    return f"{DP_SHARD} {i}, {TP} {j}"

"""How torch.chunk splits a batch over DataParallel's devices, in plain integers (no torch needed).

Readers of a trace (the explanations) and the recording side (dpviz.engines.dp.scatter) share it;
tests/test_scatter.py checks it against torch.chunk itself.
"""
from __future__ import annotations


def chunk_sizes(rows: int, devices: int) -> list[int]:
    """Rows per used device for a batch of `rows` split over `devices`, as torch.chunk splits it."""
    if rows < 0 or devices < 1:
        raise ValueError(f"need rows >= 0 and devices >= 1, got rows={rows}, devices={devices}")
    if rows == 0:
        return [0] * devices  # ATen's special case: every device gets an empty chunk
    size = -(-rows // devices)
    used = -(-rows // size)
    return [size] * (used - 1) + [rows - size * (used - 1)]

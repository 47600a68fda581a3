"""The split a loaded DataParallel trace must show: every batch's replica rows, by DataParallel's own rules.

A trace file may come from anyone; its replicas' rows are checked against what scatter_kwargs gives
for its model and input form. Shape-only (meta) tensors go through the same scatter code the
simulation runs, so zip truncation and keyword padding count, at no cost in memory.
"""
from __future__ import annotations

import torch

from ... import inputs
from ...catalogue import row_shape
from ...config import RunConfig
from ...tutorial import call
from . import scatter as rules


def replica_rows(config: RunConfig, rows: int) -> list[int]:
    """Rows each replica gets of a `rows`-row batch, by DataParallel's own rules on this model and input form."""
    data = torch.empty(rows, *row_shape(config.model, config.input_size), device="meta")
    args, kwargs = call(config, data, list(range(rows)))
    pieces, _ = rules.scatter_kwargs(args, kwargs, list(range(config.gpus)), dim=config.dim)
    firsts = [inputs.first_tensor(piece) for piece in pieces]
    return [t.shape[config.dim] if t is not None else 0 for t in firsts]

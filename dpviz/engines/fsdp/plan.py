"""FSDP's plan: each rank keeps its dim-0 shard of every parameter (FSDP2 gives rank r rows r·c .. (r+1)·c of a
parameter of d rows, c = ceil(d / W)), the gradients and the optimizer's state of that shard only, and the
activations of its own rows; while a sharded module runs its parameters are whole (padded to W·c rows: `gathered`,
the largest module's). It sends (W-1)/W of the padded parameters per all-gather, forward and backward, and of the
padded gradients per reduce-scatter.

Bytes are what torch allocates. Every rank allocates c rows of each parameter, the last ranks' fewer (or no) real
rows padded, and one reduce-scatter output of c rows per parameter with a gradient, which the gradients view;
Adam's and SGD's state follows each shard's real rows, unpadded.

Under mixed precision (MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)) the shards, their
gradients and the state stay float32; what is gathered, all-gathered and computed with is bfloat16 (the shape's
`policy`), and the gradients are reduce-scattered in float32."""
from __future__ import annotations

import dataclasses
from math import prod

from dpviz.engines.plan_rules import ModelShape, Param, device, ring_share, rows_per_device, state_bytes


def shard_elements(param: Param, rank: int, ranks: int) -> int:
    """Elements of `param` rank `rank` holds: its rows of dim 0 (none past the last row)."""
    if not param.shape:
        return param.numel if rank == 0 else 0
    rows, rest = param.shape[0], prod(param.shape[1:])
    each = -(-rows // ranks)
    return max(0, min(rows, (rank + 1) * each) - rank * each) * rest


def padded_bytes(param: Param, ranks: int) -> int:
    """What FSDP2's all-gather output holds of `param`: dim 0 padded to a multiple of the ranks."""
    if not param.shape:
        return param.bytes
    return -(-param.shape[0] // ranks) * ranks * prod(param.shape[1:]) * param.element_size


def shard_bytes(param: Param, ranks: int) -> int:
    """What every rank allocates for its shard of `param` (and for its gradient's): c padded rows."""
    if not param.shape:
        return param.bytes
    return padded_bytes(param, ranks) // ranks


def plan(shape: ModelShape, gpus: int, optimizer: str) -> list[dict[str, int]]:
    rows = rows_per_device(shape.rows, gpus)
    cast = shape.policy or shape  # what is gathered and computed with: bfloat16 under mixed precision
    by_name = {p.name: p for p in cast.params}
    grouped = [[by_name[name] for name in names if name in by_name] for _, names in shape.units]
    in_units = {p.name for group in grouped for p in group}
    grouped.append([p for p in cast.params if p.name not in in_units])  # the root's group
    gathered = max((sum(padded_bytes(p, gpus) for p in group) for group in grouped), default=0)
    padded = sum(padded_bytes(p, gpus) for p in shape.params)
    # All-gathers forward and backward of the padded parameters as computed with, a reduce-scatter of the padded
    # gradients as kept.
    sent = ring_share(gpus) * (2 * sum(padded_bytes(p, gpus) for p in cast.params) + padded)
    grads = [p for p in shape.params if p.trainable and p.reached]
    held = sum(shard_bytes(p, gpus) for p in shape.params)  # the same on every rank
    grad_bytes = sum(shard_bytes(p, gpus) for p in grads)
    devices = []
    for rank in range(gpus):
        grad_elements = sum(shard_elements(p, rank, gpus) for p in grads)  # the state: real rows only
        planned = device(held, grad_bytes, state_bytes(grads, optimizer, grad_elements), activations(shape, rows[rank]),
                         sent)
        devices.append({**planned, "gathered": gathered})
    return devices


def activations(shape: ModelShape, rows: int) -> int:
    """What a rank keeps for backward over `rows` rows: under mixed precision, what the policy's bfloat16 modules
    save and return, beside the rows as loaded."""
    if shape.policy is None:
        return shape.activations(rows)
    return dataclasses.replace(shape.policy, input_bytes=shape.input_bytes).activations(rows)

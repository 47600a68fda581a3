"""Tensor parallelism's plan, and FSDP's over it on a (dp_shard, tp) mesh, from the model's shapes.

    plan(shape, 8, "adam")          # tp 8: every GPU one rank of one tensor-parallel group
    plan(shape, 8, "adam", tp=4)    # dp_shard 2 x tp 4: FSDP shards each rank's slices again over its dp group

Each rank of a tensor-parallel group of T holds its slice of every cut Linear, as torch's ColwiseParallel and
RowwiseParallel leave it: a column-wise Linear rows k/T.. of its weight and bias (dim 0, split as torch.chunk splits
it), a row-wise one columns k/T.. of its weight and its whole bias; every other parameter (norms, embeddings, the
head left whole) whole, and the gradients and the optimizer's state of what it holds. Of the activations, what
autograd saves between a column-wise cut and the row-wise one after it is 1/T (dpviz.engines.workload.tensor_shape),
the rest whole. It sends a ring all-reduce's share, 2(T-1)/T, of each tensor it sums: a row-wise Linear's output in
forward, and in backward the gradient of each column-wise Linear's input that needs one (once for Linears that share
their input: attention's q, k and v).

With dp_shard D > 1 (torchtitan's order: TP inside each dp group, then fully_shard across the groups), each rank's
slices are what FSDP shards over the D ranks of its dp group, padded as FSDP2 pads (dpviz.engines.fsdp.plan); each
dp group takes its share of the batch's rows, and sends FSDP's all-gathers and reduce-scatter of its slices' shards
beside the tensor-parallel all-reduces. Rank r sits at (r // T, r % T) on the mesh, as init_device_mesh lays it out.
"""
from __future__ import annotations

import dataclasses

from dpviz.engines.fsdp.plan import padded_bytes, plan as fsdp_plan
from dpviz.engines.plan_rules import (CutModule, Devices, ModelShape, Param, device, ring_share, rows_per_device,
                                      state_bytes)
from dpviz.engines.tp.read.traffic import ring
from dpviz.engines.tp.spec import SPEC
from dpviz.splitting import SHARED

FORWARD, BACKWARD = "all-reduce (forward)", "all-reduce (backward)"  # as the ranks write them down (facts["moved"])
GATHER, SCATTER = "all-gather", "reduce-scatter"
CUTS = ("Linear",)  # what torch's ColwiseParallel and RowwiseParallel cut, as the plan's rules here know them


def degrees(gpus: int, tp: int) -> tuple[int, int]:
    """(dp_shard, tp): tp 0 is every GPU."""
    tp = tp or gpus
    return gpus // tp, tp


def problem(shape: ModelShape, gpus: int, tp: int) -> str | None:
    """Why `shape` is not planned with tensor parallelism of degree `tp` (0: every GPU) on `gpus` GPUs, in one
    sentence; None when it is."""
    if shape.tensor is None:
        return shape.no_tensor or ("tensor parallelism is planned in full precision only: a tensor-parallel run "
                                   "computes in its parameters' own dtype (it takes no precision option).")
    degree = tp or gpus
    if degree < 2:
        return "tensor parallelism cuts every layer over its ranks, so its degree is at least 2 (and so are the GPUs)."
    if gpus % degree:
        return (f"a tensor-parallel degree of {degree} does not divide the {gpus:,} GPUs; FSDP shards over the "
                f"GPUs / degree groups, so pick a degree that divides them.")
    heads = shape.tensor.heads
    if heads and heads % degree:
        return (f"the model's {heads} attention heads do not divide over a tensor-parallel degree of {degree}, and "
                "each rank computes whole heads of q, k and v; pick a degree that divides the heads.")
    other = next((m for m in shape.tensor.modules if m.style != SHARED and m.kind not in CUTS), None)
    if other is not None:
        return (f"the plan cuts {other.path}, a {other.kind}; the plan's rules here know how torch cuts an nn.Linear "
                "only.")
    return None


def chunk(size: int, index: int, ranks: int) -> int:
    """What rank `index` of `ranks` holds of a dim of `size` cut as torch.chunk cuts it (DTensor's Shard)."""
    each = -(-size // ranks)
    return max(0, min(size, (index + 1) * each) - index * each)


def sliced(param: Param, style: str | None, index: int, ranks: int) -> Param:
    """`param` as tensor-parallel rank `index` holds it: column-wise dim 0, a row-wise weight dim 1, else whole."""
    dim = {"colwise": 0, "rowwise": 1}.get(style or "", None)
    if dim is None or dim >= len(param.shape):
        return param
    shape = list(param.shape)
    shape[dim] = chunk(shape[dim], index, ranks)
    return dataclasses.replace(param, shape=tuple(shape))


def sliced_shape(shape: ModelShape, index: int, ranks: int) -> ModelShape:
    """The model as tensor-parallel rank `index` holds it: its parameters sliced, their names kept (FSDP's units)."""
    styles = dict(shape.tensor.styles)
    return dataclasses.replace(shape, params=tuple(sliced(p, styles.get(p.name), index, ranks) for p in shape.params))


def summed(modules: tuple[CutModule, ...]) -> tuple[int, int]:
    """(bytes forward's all-reduces sum, bytes backward's), over the example batch: each row-wise Linear's output;
    the gradient of each input a column-wise cut takes that needs one, once per shared input."""
    def shares(m: CutModule) -> bool:
        return any(o.style == SHARED and m.path.startswith(o.path + ".") for o in modules)

    forward = sum(m.output_bytes for m in modules if m.style == "rowwise")
    backward = sum(m.input_bytes for m in modules if m.input_grad and (
        m.style == SHARED or (m.style == "colwise" and not shares(m))))
    return forward, backward


def plan(shape: ModelShape, gpus: int, optimizer: str, *, tp: int = 0) -> Devices:
    why = problem(shape, gpus, tp)
    if why:
        raise ValueError(why)
    dp, degree = degrees(gpus, tp)
    rows = rows_per_device(shape.rows, dp)  # each dp group its share; every rank of a group all of it
    forward, backward = summed(shape.tensor.modules)
    devices = []
    for rank in range(gpus):
        group, index = divmod(rank, degree)
        mine = sliced_shape(shape, index, degree)
        factor = rows[group] / shape.rows if shape.rows else 0
        inside = round(shape.tensor.split_saved * factor)
        activations = shape.activations(rows[group]) - inside + round(inside / degree) if rows[group] else 0
        sent = {FORWARD: ring(degree, round(forward * factor)), BACKWARD: ring(degree, round(backward * factor))}
        if dp == 1:
            planned = device(sum(p.bytes for p in mine.params) + shape.buffer_bytes,
                             sum(p.grad_bytes for p in mine.params), state_bytes(mine.params, optimizer), activations,
                             sum(sent.values()))
        else:  # FSDP over the dp group, on this rank's slices
            sharded = fsdp_plan(mine, dp, optimizer)[group]
            padded = sum(padded_bytes(p, dp) for p in mine.params)
            sent.update({GATHER: round(ring_share(dp) * 2 * padded), SCATTER: round(ring_share(dp) * padded)})
            planned = {**device(sharded["parameters"], sharded["gradients"], sharded["optimizer state"], activations,
                                sum(sent.values())), "gathered": sharded["gathered"]}
        devices.append({**planned, "collectives": sent, "mesh": {"dp_shard": group, "tp": index}})
    label = SPEC.label if dp == 1 else "FSDP × TP"
    return Devices(devices, label, {"dp_shard": dp, "tp": degree})

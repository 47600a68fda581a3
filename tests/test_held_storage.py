"""What a rank holds, live and planned, is what torch allocates: each storage once, for a user's model whose layers
have fewer rows than ranks (FSDP2 pads every shard to the same rows) at 2, 3 and 4 ranks, under every engine.

The oracle is torch's own tensors: the same model wrapped as each engine wraps it (fully_shard per unit, DDP,
ZeroRedundancyOptimizer over Adam), one step on the rank's rows, in a fake process group as each rank in turn
(it allocates as gloo does: 40 B of parameters and of gradients on each of 4 ranks, measured with both), the
storages under its parameters, gradients and Adam's moments summed once each by their data_ptr().
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel
from torch.testing._internal.distributed.fake_pg import FakeStore

from dpviz.engines import ENGINES
from dpviz.engines.workload.shapes import measure
from dpviz.engines.workload.units import shard_units
from plan_runs import UNEVEN, held, live, uneven_model

KINDS = ("parameters", "gradients", "optimizer state")


def storage_bytes(tensors: list[torch.Tensor]) -> int:
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def allocated(engine_name: str, rank: int, ranks: int) -> dict[str, int]:
    """What torch allocates on `rank` of `ranks` for one training step with Adam, by kind, and (under "views")
    the same gradients counted per tensor's storage, as a count that does not dedupe would."""
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=ranks)
    try:
        model, batch = uneven_model()
        wrapped = model
        if engine_name == "fsdp":
            for _, unit in shard_units(model):
                fully_shard(unit)
            fully_shard(model)
        elif engine_name in ("ddp", "zero1"):
            wrapped = DistributedDataParallel(model)
            wrapped.register_comm_hook(None, _kept)  # the fake group's all-reduce hands back nothing
        optimizer = holder = torch.optim.Adam(model.parameters(), lr=0.01)
        if engine_name == "zero1":
            optimizer = ZeroRedundancyOptimizer(list(model.parameters()), optimizer_class=torch.optim.Adam, lr=0.01)
            holder = optimizer.optim
        rows = batch if engine_name == "dp" else batch.chunk(ranks)[rank]
        wrapped(rows).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)  # as a rank's step leaves them
        grads = [local(p.grad) for p in model.parameters()]
        return {"parameters": storage_bytes([local(p) for p in model.parameters()]),
                "gradients": storage_bytes(grads),
                "optimizer state": storage_bytes([local(v) for kept in holder.state.values() for v in kept.values()
                                                  if v.dim() > 0]),  # Adam's moments, not its step counters
                "views": sum(g.untyped_storage().nbytes() for g in grads),
                "real": sum(local(p).numel() * local(p).element_size() for p in model.parameters())}
    finally:
        dist.destroy_process_group()


def _kept(state, bucket):
    """A bucket's all-reduce in one process: its own gradients, summed with no one (the bucket is allocated alike)."""
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


@pytest.mark.parametrize("ranks", [2, 3, 4])
@pytest.mark.parametrize("engine_name", ["dp", "ddp", "zero1", "fsdp"])
def test_live_and_planned_bytes_are_the_storages_torch_allocates(engine_name, ranks):
    if engine_name == "dp":  # GPU 0 holds the module, its gradients and Adam's state; the others none of them
        torch_says = [allocated("dp", 0, 1)] + [{"gradients": 0, "optimizer state": 0}] * (ranks - 1)
    else:
        torch_says = [allocated(engine_name, rank, ranks) for rank in range(ranks)]
    trace = live(engine_name, UNEVEN, ranks)
    planned = ENGINES[engine_name].part("plan")(measure(*uneven_model()), ranks, "adam")
    for kind in KINDS:
        expected = [device[kind] for device in torch_says if kind in device]
        assert held(trace, kind)[:len(expected)] == expected, f"live {kind}"
        assert [device[kind] for device in planned][:len(expected)] == expected, f"planned {kind}"


def test_fsdp2_pads_every_shard_and_views_one_gradient_buffer():
    # The uneven model on 4 ranks: the last holds no real row, yet allocates as much as the first.
    torch_says = [allocated("fsdp", rank, 4) for rank in range(4)]
    assert [d["real"] for d in torch_says] == [40, 40, 24, 0]
    assert [d["parameters"] for d in torch_says] == [40] * 4
    assert [d["gradients"] for d in torch_says] == [40] * 4
    # Each Linear's weight and bias gradients view that module's one buffer (24 B and 16 B): counted per tensor,
    # each buffer twice.
    assert [d["views"] for d in torch_says] == [2 * 24 + 2 * 16] * 4
    assert [d["optimizer state"] for d in torch_says] == [80, 80, 48, 0]  # Adam's moments: real rows only
    trace = live("fsdp", UNEVEN, 4)
    assert [rank["parameters"]["elements"] * 4 for rank in trace.facts["held"]] == [40, 40, 24, 0]  # real rows
    assert held(trace, "parameters") == [40] * 4
    said = " ".join(trace.spec.part("explain")(trace))
    assert "a rank with fewer real rows (or none) still allocates as many, 40 B of parameters and 40 B of gradients" in said

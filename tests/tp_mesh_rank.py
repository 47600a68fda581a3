"""One rank of FSDP over tensor parallelism on a (dp, tp) mesh, in torch's fake process group (one process, no
peers: collectives return at once, shapes are torch's own): the model's declared plan applied with parallelize_module
on mesh["tp"], then fully_shard on mesh["dp"] for each of dpviz's units and the root (torchtitan's order), one Adam
step on ROWS rows. Prints, as JSON, the bytes this rank allocated for its parameters, gradients and Adam's moments,
and the tensors it handed each collective.

    python tests/tp_mesh_rank.py MODEL DP TP RANK ROWS

tests/test_tp_plan.py runs one per rank (a process group, once destroyed, cannot be made again in one process).
"""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402
from torch.distributed.tensor.parallel import parallelize_module  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from dpviz.catalogue import MODEL_SPECS  # noqa: E402
from dpviz.engines.ranks.program import local  # noqa: E402
from dpviz.engines.tp.parallel import torch_plan  # noqa: E402
from dpviz.engines.workload.memory import stored_bytes  # noqa: E402
from dpviz.engines.workload.models import build_model, random_rows  # noqa: E402
from dpviz.engines.workload.units import shard_units  # noqa: E402


class Handed(TorchDispatchMode):
    """The bytes of the tensors handed each collective: the input of an all-reduce (what it sums), the output of an
    all-gather (what it assembles), the input of a reduce-scatter (what it sums before scattering)."""

    def __init__(self):
        super().__init__()
        self.bytes: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        out = func(*args, **(kwargs or {}))
        handed = {"all_reduce": lambda: args[0], "all_gather_into_tensor": lambda: out,
                  "_allgather_base_": lambda: args[0], "reduce_scatter_tensor": lambda: args[0],
                  "_reduce_scatter_base_": lambda: args[1]}
        if name in handed:
            tensor = handed[name]()
            self.bytes[name] = self.bytes.get(name, 0) + tensor.numel() * tensor.element_size()
        return out


def main(model_name: str, dp: int, tp: int, rank: int, rows: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=dp * tp)
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model, _ = build_model(model_name, 5, 2)
    parallelize_module(model, mesh["tp"], torch_plan(MODEL_SPECS[model_name].tensor.styles))
    for _, unit in shard_units(model):
        fully_shard(unit, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    optimizer = torch.optim.Adam(model.parameters())
    batch = random_rows(model_name, 5, rows // dp, torch.Generator().manual_seed(rank // tp))
    handed = Handed()
    with warnings.catch_warnings(), handed:
        warnings.simplefilter("ignore")  # FSDP2's notes on views and backward hooks: not this check's business
        model(batch).float().mean().backward()
        optimizer.step()
    state = [local(value) for each in optimizer.state.values() for key, value in each.items() if key != "step"]
    print(json.dumps({"parameters": stored_bytes([local(p) for p in model.parameters()]),
                      "gradients": stored_bytes([local(p.grad) for p in model.parameters() if p.grad is not None]),
                      "optimizer state": sum(t.numel() * t.element_size() for t in state),
                      "handed": handed.bytes}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))

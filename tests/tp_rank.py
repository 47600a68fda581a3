"""One rank of a tensor-parallel check: apply a model's declared plan with torch's own parallelize_module
(ColwiseParallel, RowwiseParallel on a DeviceMesh, gloo on 127.0.0.1) and hold the output and every gradient to one
process's forward and backward of the same model on the same rows. Exit status 0 when equal; else the differences.

    python tests/tp_rank.py MODEL RANK WORLD RENDEZVOUS    # MODEL: a catalogue name, or FILE.py:FUNCTION (a module of one's own);
                                                           # RENDEZVOUS: a file path none of the ranks has made yet

tests/test_declarations.py starts WORLD of these at once; each compares on its own rank.
"""
from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Replicate  # noqa: E402
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,  # noqa: E402
                                               parallelize_module)

from dpviz.catalogue import MODEL_SPECS  # noqa: E402
from dpviz.engines.workload import declared  # noqa: E402
from dpviz.engines.workload.models import build_model, random_rows  # noqa: E402
from dpviz.engines.workload.own import load  # noqa: E402
from dpviz.splitting import matches  # noqa: E402

STYLE = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel,
         "shared_input": lambda: PrepareModuleInput(input_layouts=Replicate(), desired_input_layouts=Replicate())}
SHAPE = {"colwise": 0, "rowwise": 1}  # the dim of a Linear's weight each style cuts
ROWS = 4


def built(name: str) -> tuple[torch.nn.Module, torch.Tensor, str | None]:
    """The model (seeded: the same weights on every rank), its rows, and its catalogue name (None for one's own)."""
    torch.manual_seed(0)
    if name in MODEL_SPECS:
        model, _ = build_model(name, 5, 2)
        return model, random_rows(name, 5, ROWS, torch.Generator().manual_seed(1)), name
    model = load(name, "an nn.Module", "--model")()
    rows = load(f"{name.rsplit(':', 1)[0]}:rows", "its rows", "--example")()  # the file's rows() beside its builder
    return model, rows, None


def main(name: str, rank: int, world: int, rendezvous: str) -> int:
    torch.set_num_threads(1)  # two ranks on a machine shared with others
    # The ranks meet through a file, not a port: a free port found first and bound later can be taken meanwhile
    # by another test's ranks on a busy machine
    os.environ.update(MASTER_ADDR="127.0.0.1")
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world)
    try:
        model, rows, catalogue = built(name)
        plan = declared.tensor_plan(model, catalogue)
        alone = copy.deepcopy(model)  # the oracle: one process, the whole model
        want = alone(rows)
        want.float().pow(2).mean().backward()
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
        cut = {path: STYLE[style]() for path, style in plan.items() if style != "whole"}
        parallelize_module(model, mesh, cut)
        got = model(rows)
        got.float().pow(2).mean().backward()
        wrong = [] if torch.allclose(got, want, atol=1e-6) else [f"output differs by {(got - want).abs().max():.3g}"]
        split = []
        for (path, p), q in zip(model.named_parameters(), alone.parameters()):
            grad = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad  # a collective: every rank calls it
            if isinstance(p, DTensor):
                split.append(path)
            if not torch.allclose(grad, q.grad, atol=1e-5):
                wrong.append(f"{path}'s gradient differs by {(grad - q.grad).abs().max():.3g}")
        # Each rank's slice: 1/world of the cut dim, the rows (column-wise) or columns (row-wise) it is given.
        for path, module in model.named_modules():
            style = next((plan[k] for k in plan if path and matches(k, path)), None)
            if style in SHAPE:
                weight, whole = module.weight, dict(alone.named_modules())[path].weight
                want_shape = list(whole.shape)
                want_shape[SHAPE[style]] //= world
                mine = whole.chunk(world, dim=SHAPE[style])[rank]
                if list(weight.to_local().shape) != want_shape or not torch.equal(weight.to_local(), mine.detach()):
                    wrong.append(f"{path}'s slice on rank {rank} is {list(weight.to_local().shape)}, not {want_shape}")
        cut_paths = {n for n, m in model.named_modules() if any(matches(k, n) for k, s in plan.items()
                                                                   if s in SHAPE)}
        if not cut or {p.rsplit(".", 1)[0] for p in split} != cut_paths:
            wrong.append(f"split {sorted(split)}, but the plan cuts {sorted(cut_paths)}")
    finally:
        dist.destroy_process_group()
    print("\n".join(wrong) or "equal")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]))

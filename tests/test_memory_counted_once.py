"""Every tensor a rank holds is counted once in its memory ledger: the model's output (the last leaf module's output)
was counted twice, as that leaf's activations and as "output and loss". Torch is the oracle: the same model in one
plain process, on as many rows as the rank ran, its leaves' outputs caught by forward hooks and kept alive, each
storage counted once (the bytes of the largest tensor on it: a view adds nothing), the output and the loss the
tensors forward and the loss made."""
from __future__ import annotations

from functools import cache

import pytest
import torch
import torch.nn.functional as F

from dpviz.analysis.memory_compare import moment_step
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.workload.counted_once import LeafOutputs
from dpviz.engines.workload.models import build_model, random_rows

RANKS = 2


@cache
def recorded(name: str, model: str):
    config = RunConfig(engine=name, model=model, gpus=RANKS, train=True, batch_size=8, data_size=16, optimizer="adam")
    trace = engine(name).record(config)
    assert trace.failure is None
    return trace


def torch_counts(model_name: str, rows: int, input_size: int, output_size: int) -> tuple[int, int]:
    """(bytes of every distinct storage the leaves' outputs, the output and the loss live on; the output's and the
    loss's own bytes) for one plain forward and loss on `rows` rows."""
    model, _ = build_model(model_name, input_size, output_size)
    outputs: list[torch.Tensor] = []
    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(lambda _m, _i, out: outputs.append(out)) for m in leaves]
    output = model(random_rows(model_name, input_size, rows))
    for handle in handles:
        handle.remove()
    loss = F.mse_loss(output, torch.zeros_like(output))
    held = [t for out in outputs for t in (out if isinstance(out, tuple) else (out,))] + [output, loss]
    storages: dict[int, int] = {}
    for t in held:
        address = t.untyped_storage().data_ptr()
        storages[address] = max(storages.get(address, 0), t.nbytes)
    return sum(storages.values()), output.nbytes + loss.nbytes


@pytest.mark.parametrize("name, model", [("ddp", "linear"), ("ddp", "cnn"), ("ddp", "transformer"), ("zero1", "ffn"),
                                         ("fsdp", "ffn")])
def test_the_output_is_counted_once_as_output_and_loss(name, model):
    trace = recorded(name, model)
    config = trace.config
    step = moment_step(trace)
    for lane in trace.lanes:
        rows = sum(s.rows for s in trace.spans_of(step, "forward") if s.lane == lane.id)
        held = {m.category: m.bytes for m in trace.memory if m.batch == step and m.lane == lane.id and m.phase == "loss"}
        every, returned = torch_counts(model, rows, config.input_size, config.output_size)
        assert held["output and loss"] == returned, (name, model, lane.id)
        assert held.get("activations", 0) + held["output and loss"] == every, (name, model, lane.id, held)


def test_a_view_of_a_counted_tensor_adds_nothing_and_a_freed_address_is_counted_anew():
    leaves = LeafOutputs()
    pooled = torch.zeros(4, 8, 1, 1)
    assert leaves.add(pooled) == pooled.nbytes
    assert leaves.add(pooled.flatten(1)) == 0  # nn.Flatten's output: the same storage
    assert leaves.add(pooled) == 0  # nn.Identity's
    assert leaves.take(pooled.flatten(1)) == pooled.nbytes and leaves.take(pooled) == 0  # taken once
    fresh = torch.zeros(3)
    assert leaves.add(fresh) == fresh.nbytes
    address = fresh.untyped_storage().data_ptr()
    del fresh  # its storage freed: a later tensor at the same address is another tensor
    again = torch.zeros(3)
    if again.untyped_storage().data_ptr() == address:
        assert leaves.add(again) == again.nbytes

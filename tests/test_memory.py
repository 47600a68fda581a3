"""Computed memory per simulated device, checked against the byte sizes of the actual tensors."""
from collections import defaultdict

import pytest
import torch

from dpviz import RunConfig, record
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.dp.ledger import ComputedMemory
from dpviz.engines.workload.memory import module_bytes, nbytes


def nb(t: torch.Tensor) -> int:
    return t.nelement() * t.element_size()


@pytest.fixture(scope="module")
def setup():
    config = RunConfig(gpus=3, train=True, shuffle=False)
    trace = record(config)
    model, loader = tutorial.build(config)
    *_, (last_batch, _) = loader
    held = defaultdict(int)
    for m in trace.memory:
        if m.batch == len(trace.batches) - 1:
            held[(m.phase, m.lane, m.category)] += m.bytes
    return trace, model, last_batch, held


def test_each_category_is_the_size_of_the_tensors_dataparallel_makes(setup):
    trace, model, batch, held = setup
    params = sum(nb(p) for p in model.parameters())
    chunks = batch.chunk(3)  # torch's own split of the last batch: 4, 4, 2 rows
    outputs = [model(c) for c in chunks]
    assert held[("scatter", 0, "batch and chunks")] == nb(batch)  # chunk 0 is a view of the batch
    assert [held[("scatter", d, "batch and chunks")] for d in (1, 2)] == [nb(c) for c in chunks[1:]]
    assert held[("replicate", 0, "parameter copies")] == 0  # device 0's replica shares the parameters
    assert [held[("replicate", d, "parameter copies")] for d in (1, 2)] == [params, params]
    assert [held[("apply", d, "activations")] for d in range(3)] == [nb(o) for o in outputs]
    assert held[("gather", 0, "output and loss")] == nb(torch.cat(outputs))
    assert held[("loss", 0, "output and loss")] == nb(torch.cat(outputs)) + nb(torch.tensor(0.0))
    # During backward: device 0 holds the output's gradient and its replica's parameter gradients;
    # device d the slice of that gradient the gather's backward sends it, and its parameter gradients.
    assert held[("backward", 0, "backward buffers")] == nb(torch.cat(outputs)) + params
    assert [held[("backward", d, "backward buffers")] for d in (1, 2)] == [nb(o) + params for o in outputs[1:]]
    # After the sum onto device 0 the other devices hold nothing; momentum SGD keeps one buffer per parameter.
    assert [sum(v for (p, d, _), v in held.items() if p == "reduce" and d == lane) for lane in (1, 2)] == [0, 0]
    assert held[("reduce", 0, "gradients")] == params and held[("step", 0, "optimizer state")] == params


def test_device_zero_carries_the_most_at_every_phase(setup):
    trace, *_ = setup
    totals = defaultdict(int)
    for m in trace.memory:
        totals[(m.batch, m.phase, m.lane)] += m.bytes
    for (batch, phase, lane), total in totals.items():
        assert total <= totals[(batch, phase, 0)]
    assert trace.memory_kind == "computed"
    assert {m.batch for m in trace.memory} == {0, len(trace.batches) - 1}


def test_ledger_and_byte_helpers():
    ledger = ComputedMemory([0, 1])
    ledger.hold(1, "activations", 10)
    ledger.hold(1, "activations", 5)
    ledger.hold(0, "parameters", 7)
    assert {(m.lane, m.category, m.bytes) for m in ledger.snapshot(0, "apply")} == {(1, "activations", 15), (0, "parameters", 7)}
    ledger.drop("activations")
    assert [(m.lane, m.bytes) for m in ledger.snapshot(0, "gather")] == [(0, 7)]
    assert nbytes({"a": torch.zeros(3), "b": [torch.zeros(2, dtype=torch.float64), "text"]}) == 12 + 16
    assert module_bytes(torch.nn.BatchNorm1d(4)) == nb(torch.zeros(4)) * 4 + 8  # weight, bias, 2 running stats, count


def test_the_loss_row_holds_the_gradients_the_loop_has_not_yet_zeroed(setup):
    """The loop computes the loss, then zero_grad frees the last step's gradients, then backward: the loss row is read
    when the loss is made, before zero_grad, as every engine's is (it was read after zero_grad: no gradients). Torch's
    own loop says what .grad holds at that moment, and that zero_grad has freed it by backward."""
    trace, _, _, held = setup
    config = trace.config
    model, loader = tutorial.build(config)
    teacher, optimizer = tutorial.training_parts(config, model)
    batches = list(loader)
    at_loss = after_zero_grad = None
    for index, (data, _) in enumerate(batches):
        loss = tutorial.loss_of(config, model(data), teacher(data))
        if index == len(batches) - 1:
            at_loss = sum(nb(p.grad) for p in model.parameters() if p.grad is not None)
        optimizer.zero_grad()
        if index == len(batches) - 1:
            after_zero_grad = sum(nb(p.grad) for p in model.parameters() if p.grad is not None)
        loss.backward()
        optimizer.step()
    assert at_loss > 0 and after_zero_grad == 0
    assert held[("loss", 0, "gradients")] == at_loss
    assert held[("backward", 0, "gradients")] == after_zero_grad  # until the replicas' gradients are summed
    assert held[("reduce", 0, "gradients")] == at_loss

"""The real nn.DataParallel on real GPUs against SimulatedDataParallel on the same configuration.

Needs at least two CUDA devices; skipped elsewhere (CI has none).
"""
import dataclasses
from collections import Counter

import pytest
import torch
from torch import nn

from dpviz import RunConfig, SimulatedDataParallel, record
from dpviz.exports.tutorial_log import tutorial_log

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(GPUS < 2, reason=f"needs two CUDA devices, this machine has {GPUS}")]


@pytest.mark.parametrize("gpus,data_size,batch_size", [(2, 100, 30), (min(GPUS, 8), 100, 30), (min(GPUS, 8), 10, 10)])
def test_real_and_simulated_traces_agree(gpus, data_size, batch_size):
    config = dict(gpus=gpus, data_size=data_size, batch_size=batch_size, seed=3)
    real = record(RunConfig(backend="cuda", **config))
    simulated = record(RunConfig(backend="simulated", **config))
    assert real.backend == "cuda" and simulated.backend == "simulated"
    assert [b.sample_ids for b in real.batches] == [b.sample_ids for b in simulated.batches]
    for batch in real.batches:
        shape = lambda s: (s.lane, s.replica, s.row_offset, s.rows, s.input_shape, s.output_shape)
        assert [shape(s) for s in real.replicas(batch.index)] == [shape(s) for s in simulated.replicas(batch.index)]
        assert list(real.host_spans(batch.index)) == list(simulated.host_spans(batch.index))
    log = lambda t: Counter(tutorial_log(t).splitlines()[1:])
    assert log(real) == log(simulated)


def test_outputs_and_gradients_match_the_real_dataparallel():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
    twin = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
    twin.load_state_dict(model.state_dict())
    x = torch.randn(13, 5)
    real = nn.DataParallel(model.cuda(), device_ids=list(range(min(GPUS, 6))))
    out_real = real(x.cuda())
    out_real.square().mean().backward()
    out_sim = SimulatedDataParallel(twin, device_ids=list(range(min(GPUS, 6))))(x)
    out_sim.square().mean().backward()
    torch.testing.assert_close(out_real.cpu(), out_sim, rtol=1e-5, atol=1e-6)
    for p_real, p_sim in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p_real.grad.cpu(), p_sim.grad, rtol=1e-5, atol=1e-6)


def test_training_through_the_real_dataparallel_equals_a_plain_step():
    import torch.nn.functional as F

    torch.manual_seed(0)
    model, plain = nn.Linear(5, 2), nn.Linear(5, 2)
    plain.load_state_dict(model.state_dict())
    x, y = torch.randn(10, 5), torch.randn(10, 2)
    real = nn.DataParallel(model.cuda(), device_ids=list(range(min(GPUS, 3))))
    for net, data, target in ((real, x.cuda(), y.cuda()), (plain, x, y)):
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            optimizer.zero_grad()
            F.mse_loss(net(data), target).backward()
            optimizer.step()
    for p_real, p_plain in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(p_real.cpu(), p_plain, rtol=1e-5, atol=1e-6)


def test_real_training_trace_records_the_way_back_like_the_simulated_one():
    config = dict(gpus=min(GPUS, 3), data_size=100, batch_size=30, seed=1, train=True)
    real = record(RunConfig(backend="cuda", **config))
    simulated = record(RunConfig(backend="simulated", **config))
    for batch in real.batches:
        back = lambda t: sorted((s.lane, s.rows, s.row_offset) for s in t.spans_of(batch.index, "backward"))
        assert back(real) == back(simulated)
        assert [s.lane for s in real.spans_of(batch.index, "reduce")] == [0]
    assert real.memory_kind == "measured" and {m.category for m in real.memory} == {"allocated"}


def _failure(trace):
    f = trace.failure
    return None if f is None else (f.batch, f.type, f.replica, f.message.splitlines()[0], f.original)


@pytest.mark.parametrize("name", ["idle-gpus", "batchnorm-one-row", "kwargs-small-batch", "scalar-loss", "rnn-hidden-dim", "state-lost"])
def test_each_pitfall_happens_on_real_gpus_as_simulated(name):
    from dpviz.presets import PRESETS

    config = PRESETS[name].config
    if config.gpus > GPUS:
        pytest.skip(f"preset {name} needs {config.gpus} GPUs, this machine has {GPUS}")
    real = record(dataclasses.replace(config, backend="cuda"))
    simulated = record(dataclasses.replace(config, backend="simulated"))
    assert _failure(real) == _failure(simulated)  # same error, same replica, same words
    assert [(w.category, w.message, w.batch, w.count) for w in real.warnings] == \
        [(w.category, w.message, w.batch, w.count) for w in simulated.warnings]
    assert [b.output_shape for b in real.batches] == [b.output_shape for b in simulated.batches]
    assert real.facts.get("state") == simulated.facts.get("state")  # lost state is lost the same way
    for r, s in zip(real.facts.get("losses", []), simulated.facts.get("losses", [])):
        torch.testing.assert_close(torch.tensor(r["gathered"]), torch.tensor(s["gathered"]), rtol=1e-4, atol=1e-5)
    argument = lambda t: [(a.batch, a.replica, a.path, a.kind, a.shape, a.mode) for a in t.arguments]
    assert argument(real) == argument(simulated)


@pytest.mark.parametrize("model,inputs", [("mlp", "tensor"), ("cnn", "dict"), ("gru", "tuple"), ("gru_dim1", "hidden"),
                                          ("counter", "list"), ("loss", "kwargs")])
def test_every_model_and_input_form_splits_on_real_gpus_as_simulated(model, inputs):
    config = RunConfig(model=model, inputs=inputs, gpus=min(GPUS, 3), data_size=60, batch_size=20, train=True)  # no short batch: kwargs would fail on it
    real = record(dataclasses.replace(config, backend="cuda"))
    simulated = record(dataclasses.replace(config, backend="simulated"))
    assert real.failure is None and simulated.failure is None
    for batch in real.batches:
        shape = lambda s: (s.lane, s.rows, s.row_offset, s.input_shape, s.output_shape)
        assert [shape(s) for s in real.replicas(batch.index)] == [shape(s) for s in simulated.replicas(batch.index)]
        back = lambda t: sorted((s.lane, s.rows) for s in t.spans_of(batch.index, "backward"))
        assert back(real) == back(simulated)

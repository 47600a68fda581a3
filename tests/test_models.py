"""The models of dpviz.engines.workload.models under SimulatedDataParallel, against the same module run plainly.

The oracle is PyTorch itself: the plain module's forward on the whole batch (or, where DataParallel
computes per chunk by design, on each torch.chunk chunk), a plain forward/backward/SGD step for
gradients and weights (also for a recorded training run of the model that returns its loss), and
torch.chunk for how a batch is split (along dim 1 for the time-first GRU).
Also the configuration rules that come with the models: a hidden state needs a GRU, and the data-size
limit counts the numbers in a row.
"""
from __future__ import annotations

import copy
import threading
import warnings

import pytest
import torch
from torch import nn

from dpviz import record
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.config import MAX_DATASET_ELEMENTS, MODELS, RNN_MODELS, ConfigError, RunConfig
from dpviz.engines.workload.models import SEQUENCE_LENGTH, build_model, random_rows, row_shape
from dpviz.engines.dp.simulated import SimulatedDataParallel, current_device
from test_scatter import torch_scalar_warning

INPUT, OUTPUT = 5, 3
BATCHNORM = ("mlp", "cnn")
# (gpus, rows): even and uneven splits, fewer chunks than devices, one device, and a 1-row chunk.
COMBOS = [(1, 7), (2, 8), (3, 10), (8, 10), (4, 5), (8, 3)]


def make(name: str, seed: int = 0) -> tuple[nn.Module, int]:
    torch.manual_seed(seed)
    return build_model(name, INPUT, OUTPUT)


def batch(name: str, rows: int, dim: int, seed: int = 1) -> torch.Tensor:
    """A random batch as the model takes it: rows along `dim` (time first for gru_dim1)."""
    x = random_rows(name, INPUT, rows, torch.Generator().manual_seed(seed))  # token ids for the transformer
    return x.transpose(0, 1) if dim == 1 else x


def parallel(module: nn.Module, gpus: int, dim: int) -> SimulatedDataParallel:
    return SimulatedDataParallel(module, device_ids=list(range(gpus)), dim=dim)


def one_row_free(gpus: int, rows: int) -> bool:
    return 1 not in [c.shape[0] for c in torch.empty(rows).chunk(gpus)]


class InputShapes:
    """A forward pre-hook recording each replica's device and input shape."""

    def __init__(self, module: nn.Module):
        self.seen: list[tuple[int | None, tuple[int, ...]]] = []
        self.lock = threading.Lock()
        self.handle = module.register_forward_pre_hook(self)

    def __call__(self, module, args):
        with self.lock:
            self.seen.append((current_device(), tuple(args[0].shape)))

    def by_device(self) -> list[tuple[int, ...]]:
        return [shape for _, shape in sorted(self.seen, key=lambda s: s[0])]


# ---------------------------------------------------------------- forward

@pytest.mark.parametrize("gpus,rows", COMBOS)
@pytest.mark.parametrize("name", [m for m in MODELS if m != "loss"])
def test_output_equals_plain_forward_on_the_whole_batch(name, gpus, rows):
    """Gathered output == the plain module on the whole batch (BatchNorm models in eval mode, where
    normalising does not depend on the batch)."""
    module, dim = make(name)
    if name in BATCHNORM:
        module.eval()
    x = batch(name, rows, dim)
    plain = copy.deepcopy(module)  # counter changes its own state in forward
    with torch.no_grad():
        got, want = parallel(module, gpus, dim)(x), plain(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("gpus,rows", [c for c in COMBOS if c[0] > 1])
@pytest.mark.parametrize("name", BATCHNORM)
def test_batchnorm_in_training_normalises_each_chunk_on_its_own(name, gpus, rows):
    """In training mode BatchNorm uses each replica's own chunk statistics: the output is the plain
    module on each torch.chunk chunk, concatenated, and not the plain module on the whole batch. A
    1-row chunk makes BatchNorm1d raise, in the replica, what the plain module raises on that chunk."""
    module, dim = make(name)
    module.train()
    x = batch(name, rows, dim)
    plain = copy.deepcopy(module)
    with torch.no_grad():
        if name == "mlp" and not one_row_free(gpus, rows):
            one = next(i for i, c in enumerate(x.chunk(gpus, dim)) if c.shape[dim] == 1)
            with pytest.raises(ValueError) as want:
                plain(x.chunk(gpus, dim)[one])
            with pytest.raises(ValueError) as got:
                parallel(module, gpus, dim)(x)
            lines = str(got.value).splitlines()
            assert lines[0] == f"Caught ValueError in replica {one} on device {one}."
            assert lines[-1] == f"ValueError: {want.value}"
            return
        got = parallel(module, gpus, dim)(x)
        per_chunk = torch.cat([plain(c) for c in x.chunk(gpus, dim)], dim)
        whole = plain(x)
    torch.testing.assert_close(got, per_chunk)
    assert not torch.allclose(got, whole, atol=1e-4)


def test_mlp_in_training_on_one_device_is_the_plain_module():
    """One device is a direct call: whole-batch statistics, exactly the plain module."""
    module, dim = make("mlp")
    x = batch("mlp", 9, dim)
    plain = copy.deepcopy(module)
    with torch.no_grad():
        torch.testing.assert_close(parallel(module, 1, dim)(x), plain(x))


@pytest.mark.parametrize("gpus,rows", COMBOS)
def test_loss_model_gathers_one_loss_per_chunk(gpus, rows):
    """A 0-dim loss per replica: the gathered vector holds the plain module's loss on each chunk; on one
    device the call is direct and returns the whole batch's loss."""
    module, dim = make("loss")
    x = batch("loss", rows, dim)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = parallel(module, gpus, dim)(x)
    assert [str(w.message) for w in caught] == ([torch_scalar_warning()] if gpus > 1 else [])
    with torch.no_grad():
        if gpus == 1:
            want = module(x)
        else:
            want = torch.stack([module(c) for c in x.chunk(gpus, dim)])
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("gpus,rows", [(2, 8), (3, 10), (8, 10), (4, 5)])
def test_gru_dim1_splits_and_gathers_along_dim_1(gpus, rows):
    """Time first: replicas get (time, chunk, features) with torch.chunk's sizes on dim 1, and the output
    is gathered along dim 1 into the plain module's output."""
    module, dim = make("gru_dim1")
    assert dim == 1
    x = batch("gru_dim1", rows, dim)
    assert x.shape == (SEQUENCE_LENGTH, rows, INPUT)
    shapes = InputShapes(module)
    with torch.no_grad():
        got = parallel(module, gpus, dim)(x)
    shapes.handle.remove()
    assert shapes.by_device() == [tuple(c.shape) for c in x.chunk(gpus, 1)]
    assert all(s[0] == SEQUENCE_LENGTH and s[2] == INPUT for s in shapes.by_device())
    with torch.no_grad():
        want = module(x)
    assert got.shape == want.shape == (SEQUENCE_LENGTH, rows, OUTPUT)
    torch.testing.assert_close(got, want)


# ---------------------------------------------------------------- training

def _train_step(config: RunConfig, gpus: int | None, eval_mode: bool):
    """One training step on the run's first batch: through SimulatedDataParallel with `gpus` devices, or
    plainly when gpus is None. Returns (loss, gradients, parameters after the SGD step)."""
    model, loader = tutorial.build(config)
    if eval_mode:
        model.eval()
    teacher, optimizer = tutorial.training_parts(config, model)
    data, indices = next(iter(loader))
    args, kwargs = tutorial.call(config, data, indices.tolist())
    runner = model if gpus is None else SimulatedDataParallel(model, device_ids=list(range(gpus)), dim=config.dim)
    output = runner(*args, **kwargs)
    with torch.no_grad():
        target = teacher(tutorial.model_input(config, data))
    loss = tutorial.loss_of(config, output, target)
    optimizer.zero_grad()
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    optimizer.step()
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    return loss.detach(), grads, params


@pytest.mark.parametrize("gpus,rows", [(2, 8), (3, 10), (8, 10), (4, 5)])
@pytest.mark.parametrize("name,eval_mode", [("linear", False), ("cnn", True), ("gru", False), ("gru_dim1", False),
                                            ("transformer", False)])
def test_training_gradients_equal_a_plain_step(name, eval_mode, gpus, rows):
    """Loss on the gathered output, backward through the replicas: the summed gradients and the SGD step
    equal a plain step on the whole batch."""
    config = RunConfig(model=name, gpus=gpus, batch_size=rows, data_size=rows, input_size=INPUT,
                       output_size=OUTPUT, train=True, backend="simulated")
    loss, grads, params = _train_step(config, gpus, eval_mode)
    plain_loss, plain_grads, plain_params = _train_step(config, None, eval_mode)
    torch.testing.assert_close(loss, plain_loss)
    assert grads.keys() == plain_grads.keys() and grads
    for key in grads:
        torch.testing.assert_close(grads[key], plain_grads[key], msg=lambda m: f"{key}: {m}")
        torch.testing.assert_close(params[key], plain_params[key])


# ---------------------------------------------------------------- configuration

@pytest.mark.parametrize("model", [m for m in MODELS if m not in RNN_MODELS])
def test_a_hidden_state_needs_a_gru(model):
    """inputs="hidden" with a model that has no hidden state is refused with one sentence."""
    with pytest.raises(ConfigError) as error:
        RunConfig(model=model, inputs="hidden")
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and ". " not in message
    assert repr(model) in message and all(m in message for m in RNN_MODELS)


@pytest.mark.parametrize("model", RNN_MODELS)
def test_a_gru_takes_a_hidden_state(model):
    assert RunConfig(model=model, inputs="hidden").inputs == "hidden"


def test_data_size_limit_counts_numbers_per_row():
    """A 1024 x 1024 image is 1,048,576 numbers: 16 of them fill the 16,777,216-number limit."""
    assert MAX_DATASET_ELEMENTS // (1024 * 1024) == 16
    assert RunConfig(model="cnn", input_size=1024, data_size=16, batch_size=16).row_elements == 1024 * 1024
    with pytest.raises(ConfigError) as error:
        RunConfig(model="cnn", input_size=1024, data_size=17, batch_size=17)
    assert "\n" not in str(error.value) and f"{MAX_DATASET_ELEMENTS:,}" in str(error.value)
    # The same 17 rows of plain features are far inside the limit.
    assert RunConfig(model="linear", input_size=1024, data_size=17).data_size == 17


@pytest.mark.parametrize("model", MODELS)
def test_row_elements_is_the_numbers_in_a_row(model):
    """What the limit counts is the size of one row the dataset actually holds."""
    config = RunConfig(model=model, input_size=4, data_size=3, batch_size=3)
    data, _ = next(iter(tutorial.build(config)[1]))
    assert config.row_elements == data[0].numel()


@pytest.mark.parametrize("gpus,rows", [(2, 8), (3, 10), (4, 5)])
def test_loss_model_gradient_is_the_mean_of_chunk_losses(gpus, rows):
    """Averaging the gathered per-replica losses (tutorial.loss_of) gives the gradient of the mean of the
    plain module's per-chunk losses: each chunk weighs the same, whatever its rows."""
    config = RunConfig(model="loss", gpus=gpus, batch_size=rows, data_size=rows, input_size=INPUT,
                       output_size=OUTPUT, train=True, backend="simulated")
    model, loader = tutorial.build(config)
    plain = copy.deepcopy(model)
    data, indices = next(iter(loader))
    args, kwargs = tutorial.call(config, data, indices.tolist())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        output = SimulatedDataParallel(model, device_ids=list(range(gpus)), dim=config.dim)(*args, **kwargs)
    tutorial.loss_of(config, output, None).backward()
    torch.stack([plain(c) for c in data.chunk(gpus)]).mean().backward()
    for (key, p), q in zip(model.named_parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=lambda m: f"{key}: {m}")


@pytest.mark.parametrize("gpus", [1, 3])
def test_recorded_training_of_the_loss_model_is_a_plain_loop_on_chunk_losses(gpus):
    """record() trains the loss model (its frozen teacher has no gradients to watch): every replica's
    backward is recorded with torch.chunk's rows, and the losses it reports for the last batch, after the
    earlier steps, are a plain loop's that steps on the mean of the plain module's per-chunk losses."""
    config = RunConfig(model="loss", gpus=gpus, train=True, data_size=50, batch_size=16, backend="simulated")
    trace = record(config)
    assert trace.failure is None and len(trace.batches) == config.num_batches

    model, loader = tutorial.build(config)
    _, optimizer = tutorial.training_parts(config, model)
    last = config.num_batches - 1
    for index, (data, indices) in enumerate(loader):
        chunks = data.chunk(gpus)
        backward = sorted(trace.spans_of(index, "backward"), key=lambda s: s.replica)
        assert [s.rows for s in backward] == [c.shape[0] for c in chunks]
        if index == last:
            with torch.no_grad():
                want = {"gathered": [float(model(c)) for c in chunks], "whole": float(model(data))}
        optimizer.zero_grad()
        torch.stack([model(c) for c in chunks]).mean().backward()
        optimizer.step()
    got = trace.facts["losses"][-1]
    assert got["batch"] == last
    assert got["gathered"] == pytest.approx(want["gathered"], rel=1e-5)
    assert got["whole"] == pytest.approx(want["whole"], rel=1e-5)

"""SimulatedDataParallel against PyTorch: a plain forward/backward of the same module is the oracle
for values and gradients, torch.chunk for how many replicas run, torch's own parallel_apply (with CPU
stand-ins for torch.accelerator) for replica errors, and the fact sheet (§1, §5, §6) for threads,
devices, grad mode, errors and the state that replicas lose."""
from __future__ import annotations

import contextlib
import copy
import gc
import importlib
import re
import threading
import time
import types
import warnings

import pytest
import torch
from torch import nn

from dpviz.engines.dp.scatter import SCALAR_GATHER_WARNING
from dpviz.engines.dp import simulated
from dpviz.engines.dp.simulated import SimulatedDataParallel, _on_device, current_device
from dpviz.engines.dp.workers import POOL

GRID = [(n, k) for n in (0, 1, 2, 3, 5, 8, 10, 30) for k in (1, 2, 3, 4, 8)]


def dp(module: nn.Module, k: int = 3, **kw) -> SimulatedDataParallel:
    return SimulatedDataParallel(module, device_ids=kw.pop("device_ids", list(range(k))), **kw)


def chunk_rows(n: int, k: int, dim: int = 0, width: int = 5) -> list[int]:
    """torch's own answer to how many rows each used device gets."""
    shape = (n, width) if dim == 0 else (width, n)
    return [c.shape[dim] for c in torch.empty(shape).chunk(k, dim)]


class Recorder:
    """A forward hook that records (device, input shape, thread) once per replica call."""

    def __init__(self, module: nn.Module):
        self.calls: list[tuple[int | None, tuple, threading.Thread]] = []
        self._lock = threading.Lock()
        module.register_forward_hook(self)

    def __call__(self, module, args, output):
        with self._lock:
            shape = tuple(args[0].shape) if args else ()
            self.calls.append((current_device(), shape, threading.current_thread()))


# ---------------------------------------------------------------- values and gradients

@pytest.mark.parametrize("n,k", GRID)
def test_output_equals_plain_forward(n, k):
    """The gathered output equals one plain forward of the same module on the whole batch."""
    torch.manual_seed(n * 100 + k)
    module, x = nn.Linear(5, 2), torch.randn(n, 5)
    out = dp(module, k)(x)
    torch.testing.assert_close(out, module(x))


def _mlp():
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.mark.parametrize("make", [lambda: nn.Linear(5, 2), _mlp], ids=["linear", "mlp"])
@pytest.mark.parametrize("loss", ["sum", "mean"])
@pytest.mark.parametrize("n,k", [(1, 3), (3, 8), (10, 3), (10, 8), (30, 2), (30, 4), (7, 1)])
def test_gradients_equal_single_device(make, loss, n, k):
    """Backward through gather/replicas sums replica gradients into the module's own parameters,
    equal to a plain backward on the whole batch; the input gradient matches too (facts §8)."""
    torch.manual_seed(n * 10 + k)
    module = make()
    reference = copy.deepcopy(module)
    x = torch.randn(n, 5, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()

    getattr(dp(module, k)(x), loss)().backward()
    getattr(reference(x_ref), loss)().backward()

    for (name, p), p_ref in zip(module.named_parameters(), reference.parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, p_ref.grad)
    torch.testing.assert_close(x.grad, x_ref.grad)


# ---------------------------------------------------------------- replicas, threads, devices

@pytest.mark.parametrize("n,k", GRID)
def test_replicas_used_equals_number_of_chunks(n, k):
    """The forward hook fires once per replica: as many as torch.chunk pieces, each with its chunk."""
    module = nn.Linear(5, 2)
    rec = Recorder(module)
    dp(module, k)(torch.randn(n, 5))
    by_device = sorted((device, shape[0]) for device, shape, _ in rec.calls)
    assert [rows for _, rows in by_device] == chunk_rows(n, k)
    assert [device for device, _ in by_device] == list(range(len(chunk_rows(n, k))))


@pytest.mark.parametrize("n,k", [(9, 3), (10, 8), (2, 2)])
def test_replicas_run_concurrently_on_their_own_threads(n, k, monkeypatch):
    """With threads enough, each replica runs on its own thread and they overlap in time (facts §6)."""
    monkeypatch.setattr(POOL, "threads", k)  # by default one per core: see the next test
    replicas = len(chunk_rows(n, k))
    barrier = threading.Barrier(replicas, timeout=10)  # breaks unless all replicas are running at once

    class Meet(nn.Module):
        def forward(self, x):
            barrier.wait()
            return x

    rec = Recorder(module := Meet())
    dp(module, k)(torch.randn(n, 5))
    threads = [thread for _, _, thread in rec.calls]
    assert len(threads) == replicas
    assert len({id(t) for t in threads}) == replicas
    assert threading.current_thread() not in threads


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_replicas_beyond_the_threads_take_turns_with_the_same_results(threads, monkeypatch):
    """More replicas than threads (cores): replica i runs whole on thread i mod threads, never the caller's,
    the outputs and gradients exactly those of one thread per replica."""
    model, x = nn.Linear(5, 3), torch.randn(16, 5)
    rec = Recorder(model)
    monkeypatch.setattr(POOL, "threads", 8)
    expected = dp(model, 8)(x)
    expected.sum().backward()
    expected_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    rec.calls.clear()
    monkeypatch.setattr(POOL, "threads", threads)
    out = dp(model, 8)(x)
    out.sum().backward()
    assert torch.equal(out, expected)
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), expected_grads))
    thread_of = {device: thread for device, _, thread in rec.calls}
    assert sorted(thread_of) == list(range(8)) and threading.current_thread() not in thread_of.values()
    assert len(set(thread_of.values())) == threads
    assert all(thread_of[d] is thread_of[d % threads] for d in range(8))


@pytest.mark.parametrize("n,k", [(9, 1), (1, 4)])
def test_single_replica_runs_on_calling_thread(n, k):
    """One device is a direct call; one chunk on several devices runs inline too (no extra thread)."""
    module = nn.Linear(5, 2)
    rec = Recorder(module)
    dp(module, k)(torch.randn(n, 5))
    assert [(d, t) for d, _, t in rec.calls] == [(0, threading.current_thread())]


def test_current_device_follows_device_ids_order():
    """Chunk i runs on device_ids[i] (here [2, 0, 1]), yet outputs are gathered in chunk order."""
    seen: list[tuple[int | None, list[float]]] = []

    class Note(nn.Module):
        def forward(self, x):
            seen.append((current_device(), x[:, 0].tolist()))
            return x * 2

    device_ids = [2, 0, 1]
    x = torch.arange(10.0).unsqueeze(1)
    out = dp(Note(), device_ids=device_ids)(x)
    expected = {device: chunk[:, 0].tolist() for device, chunk in zip(device_ids, x.chunk(3))}
    assert dict(seen) == expected and len(seen) == 3
    assert torch.equal(out, x * 2)
    assert current_device() is None


def test_no_inputs_runs_one_replica_on_first_device():
    """forward() with no arguments at all runs a single replica, on device_ids[0] (facts §1 step 5)."""

    class NoArgs(nn.Module):
        def forward(self):
            return torch.full((2,), float(current_device()))

    rec = Recorder(module := NoArgs())
    out = dp(module, device_ids=[2, 0, 1])()
    assert [(d, s) for d, s, _ in rec.calls] == [(2, ())]
    assert torch.equal(out, torch.full((2,), 2.0))


def test_grad_mode_is_carried_into_replica_threads():
    """Replica threads see the caller's grad mode; under no_grad the output has no grad_fn."""
    seen: list[bool] = []

    class Probe(nn.Linear):
        def forward(self, x):
            seen.append(torch.is_grad_enabled())
            return super().forward(x)

    model = dp(Probe(5, 2), 3)
    with torch.no_grad():
        out = model(torch.randn(9, 5))
    assert seen == [False] * 3
    assert out.grad_fn is None and not out.requires_grad

    seen.clear()
    out = model(torch.randn(9, 5))
    assert seen == [True] * 3
    assert out.grad_fn is not None


def test_autocast_flag_is_carried_into_replica_threads():
    """Autocast state is thread-local; parallel_apply re-enters it in each replica (CPU stands in
    for the accelerator here)."""
    seen: list[bool] = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(torch.is_autocast_enabled("cpu"))
            return x

    with torch.autocast("cpu", dtype=torch.bfloat16):
        dp(Probe(), 3)(torch.randn(9, 5))
    dp(Probe(), 3)(torch.randn(9, 5))
    assert seen == [True] * 3 + [False] * 3


def _autocast_states(context) -> list[tuple]:
    """Autocast's thread-local state inside `context` and after it, on a new thread, when the body
    changes it all (as a replica's own code may)."""
    states: list[tuple] = []

    def state() -> tuple:
        nesting = torch.autocast_increment_nesting()
        torch.autocast_decrement_nesting()
        return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), torch.is_autocast_cache_enabled(),
                nesting)

    def run() -> None:
        torch.set_autocast_dtype("cpu", torch.float16)  # a thread's state as a model's code left it
        states.append(state())
        with context():
            states.append(state())
            torch.set_autocast_enabled("cpu", True)
            torch.set_autocast_dtype("cpu", torch.bfloat16)
            torch.set_autocast_cache_enabled(False)
        states.append(state())

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return states


def test_replica_autocast_context_is_torchs():
    """The context a replica runs in when autocast is off sets and restores what torch.autocast does."""
    from dpviz.engines.dp.simulated import _autocast

    assert _autocast_states(lambda: _autocast(False)) == _autocast_states(lambda: torch.autocast("cpu", enabled=False))
    assert isinstance(_autocast(True), torch.autocast)


def test_replica_parameters_are_plain_non_leaf_tensors():
    """Replicas hold parameter copies as non-leaf plain tensors and own no Parameters (facts §5)."""
    seen: list[tuple] = []

    class Probe(nn.Linear):
        def forward(self, x):
            seen.append((type(self.weight), self.weight.is_leaf, len(list(self.parameters())), self is module))
            return super().forward(x)

    module = Probe(5, 2)
    dp(module, 3)(torch.randn(9, 5))
    assert seen == [(torch.Tensor, False, 0, False)] * 3


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("device_ids", [[0, 1, 2], [5, 3, 4]])
def test_first_failing_replica_by_index_is_reraised(device_ids):
    """Replica 1 fails late and replica 2 fails early: replica 1's ValueError is the one re-raised."""

    class Fails(nn.Module):
        def forward(self, x):
            index = device_ids.index(current_device())
            if index == 1:
                time.sleep(0.2)
                raise ValueError("replica one broke")
            if index == 2:
                raise KeyError("replica two broke")
            return x

    with pytest.raises(ValueError) as err:
        dp(Fails(), device_ids=device_ids)(torch.randn(9, 5))
    assert f"Caught ValueError in replica 1 on device {device_ids[1]}" in str(err.value)
    assert "replica one broke" in str(err.value) and "replica two broke" not in str(err.value)


def test_single_device_error_is_not_wrapped():
    """One device is a direct call (error unwrapped); one replica of several still goes through
    parallel_apply, which wraps it."""

    class Fails(nn.Module):
        def forward(self, x):
            raise ValueError("plain")

    with pytest.raises(ValueError) as err:
        dp(Fails(), 1)(torch.randn(4, 5))
    assert str(err.value) == "plain"
    with pytest.raises(ValueError) as err:
        dp(Fails(), device_ids=[3, 1])(torch.randn(1, 5))
    assert "Caught ValueError in replica 0 on device 3" in str(err.value)


class AddDelta(nn.Module):
    def forward(self, x, delta):
        return x + delta


def test_kwargs_with_small_batch_leave_a_replica_without_positional_args():
    """1 row + delta=3 on 2 devices: replica 1 gets no x and fails with Python's TypeError (facts §4)."""
    with pytest.raises(TypeError) as plain:
        AddDelta()(delta=3)  # what a call without the positional argument says
    with pytest.raises(TypeError) as err:
        dp(AddDelta(), 2)(torch.randn(1, 5), delta=3)
    assert "Caught TypeError in replica 1 on device 1" in str(err.value)
    assert "missing 1 required positional argument: 'x'" in str(plain.value)
    assert str(plain.value) in str(err.value)


def test_fewer_kwargs_pieces_than_replicas_fail_the_length_check():
    """30-row x with a 4-row kwarg on 3 devices: parallel_apply's kwargs_tup length AssertionError."""
    x, m = torch.randn(30, 5), torch.randn(4, 5)
    replicas, kwargs = len(x.chunk(3)), len(m.chunk(3))
    with pytest.raises(AssertionError) as err:
        dp(AddDelta(), 3)(x, delta=m)
    assert str(err.value) == f"The number of modules {replicas} is not equal to the number of kwargs_tup {kwargs}"


# ---------------------------------------------------------------- gather of scalars

class SumLoss(nn.Linear):
    def forward(self, x):
        return super().forward(x).sum()


@pytest.mark.parametrize("n,k", [(10, 3), (10, 8), (1, 4)])
def test_scalar_outputs_warn_and_gather_to_a_vector(n, k):
    """A forward returning a scalar warns with torch's text and yields a vector of length = replicas."""
    torch.manual_seed(0)
    module, x = SumLoss(5, 2), torch.randn(n, 5)
    with pytest.warns(UserWarning, match=re.escape(SCALAR_GATHER_WARNING)):
        out = dp(module, k)(x)
    chunks = x.chunk(k)
    assert out.shape == (len(chunks),)
    torch.testing.assert_close(out, torch.stack([module(c) for c in chunks]))


def test_scalar_output_with_one_device_is_returned_as_is():
    """One device skips gather entirely: the scalar comes back unchanged and nothing warns."""
    module, x = SumLoss(5, 2), torch.randn(6, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = dp(module, 1)(x)
    assert out.dim() == 0
    torch.testing.assert_close(out, module(x))


# ---------------------------------------------------------------- state in replicas

def test_batchnorm_running_stats_come_from_chunk_zero_only():
    """Train-mode BN: replica 0 shares buffers with the module, other replicas' updates are lost."""
    torch.manual_seed(0)
    bn, x = nn.BatchNorm1d(3), torch.randn(10, 3) * 3 + 1
    only_chunk0, whole = copy.deepcopy(bn), copy.deepcopy(bn)
    out = dp(bn, 3)(x)
    only_chunk0(x.chunk(3)[0])
    whole(x)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(bn, name), getattr(only_chunk0, name))
    assert not torch.allclose(bn.running_mean, whole.running_mean)
    # Each replica normalises with its own chunk's statistics.
    per_chunk = torch.cat([copy.deepcopy(whole).train()(c) for c in x.chunk(3)])
    torch.testing.assert_close(out, per_chunk)


def test_attribute_rebinding_in_forward_is_lost():
    """self.counter += 1 in replicas leaves the original unchanged; a shared list is mutated by all."""

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.counter, self.log = 0, []

        def forward(self, x):
            self.counter += 1
            self.log.append(current_device())
            return x

    module = Counting()
    dp(module, 3)(torch.randn(9, 5))
    assert module.counter == 0
    assert sorted(module.log) == [0, 1, 2]
    dp(module, 1)(torch.randn(9, 5))  # one device: a direct call on the module itself
    assert module.counter == 1


class DoublesInput(nn.Linear):
    def forward(self, x):
        x.mul_(2)  # in place, on this replica's own chunk
        return super().forward(x)


def test_replicas_beyond_the_first_work_on_copies_of_their_chunk():
    """comm.scatter copies each chunk to its device (facts §2): in-place ops in replicas 1.. leave the
    caller's rows alone and don't bump a shared version counter, so backward works."""
    for seed in range(5):  # the shared-counter failure depends on thread timing
        torch.manual_seed(seed)
        module, x = DoublesInput(5, 2), torch.randn(9, 5)
        reference, before = copy.deepcopy(module), x.clone()
        dp(module, 3)(x).sum().backward()
        reference(before.clone()).sum().backward()
        rows0 = len(before.chunk(3)[0])
        assert torch.equal(x[rows0:], before[rows0:])  # chunk 0 may alias: the batch is on device_ids[0]
        torch.testing.assert_close(module.weight.grad, reference.weight.grad)


# ---------------------------------------------------------------- dim=1

class BatchOnDim1(nn.Linear):
    def forward(self, x):
        return super().forward(x.transpose(0, 1)).transpose(0, 1)


@pytest.mark.parametrize("n,k", [(10, 3), (3, 8), (30, 4), (0, 2)])
def test_dim1_splits_and_gathers_along_dim1(n, k):
    """dim=1 splits every input along dim 1 and concatenates the outputs along dim 1."""
    torch.manual_seed(n + k)
    module, x = BatchOnDim1(5, 2), torch.randn(5, n)
    rec = Recorder(module)
    out = dp(module, k, dim=1)(x)
    torch.testing.assert_close(out, module(x))
    rec.calls = [c for c in rec.calls if c[0] is not None]  # drop the plain call just above
    assert [shape[1] for _, shape, _ in sorted(rec.calls, key=lambda c: c[0])] == chunk_rows(n, k, dim=1)


# ---------------------------------------------------------------- torch's own parallel_apply

class _Accelerator:
    """torch.accelerator for simulated devices: available, no streams, dpviz's device context."""

    is_available = staticmethod(lambda: True)
    current_accelerator = staticmethod(lambda: torch.device("cpu"))
    current_stream = staticmethod(lambda device=None: contextlib.nullcontext())
    device_index = staticmethod(_on_device)


class _TorchStandIn:
    """The name `torch` as parallel_apply.py sees it: torch itself, but with _Accelerator."""

    accelerator = _Accelerator

    def __getattr__(self, name):
        return getattr(torch, name)


@pytest.fixture
def torch_parallel_apply(monkeypatch):
    """torch.nn.parallel.parallel_apply, unchanged, running on CPU threads that stand in for devices."""
    module = importlib.import_module("torch.nn.parallel.parallel_apply")
    monkeypatch.setattr(module, "torch", _TorchStandIn())
    # _get_device_index(None, optional=True) asks the runtime for its current device; here that is the
    # simulated one, 0 unless set, as torch.cuda.current_device() is 0 unless torch.cuda.device sets it.
    monkeypatch.setattr(torch._utils, "_get_current_device_index", lambda: current_device() or 0)
    return module.parallel_apply


class FailsAt(nn.Module):
    """Records the device it runs on; the replica numbered `fail` raises ValueError."""

    def __init__(self, index: int, fail: int | None, seen: dict[int, int | None]):
        super().__init__()
        self.index, self.fail, self.seen = index, fail, seen

    def forward(self, x):
        self.seen[self.index] = current_device()
        if self.index == self.fail:
            raise ValueError(f"replica {self.index} broke")
        return x


def _apply_outcome(apply, devices, current, fail=1, count=3):
    """What one parallel_apply call does: the first line of its error (or None) and each replica's device."""
    seen: dict[int, int | None] = {}
    modules = [FailsAt(i, fail, seen) for i in range(count)]
    context = _on_device(current) if current is not None else contextlib.nullcontext()
    message = None
    with context:
        try:
            apply(modules, [torch.ones(2, 2)] * count, None, devices)
        except ValueError as error:
            message = str(error).splitlines()[0]
    return message, [seen.get(i) for i in range(count)]


@pytest.mark.parametrize("current", [None, 2])
@pytest.mark.parametrize("devices", [None, [5, 3, 4], [None, 3, None], [torch.device("cuda", 1)] * 3])
@pytest.mark.parametrize("fail", [None, 1])
def test_module_level_parallel_apply_names_devices_as_torch_does(torch_parallel_apply, devices, current, fail):
    """With devices=None, torch's parallel_apply resolves every replica's device to the caller's current
    device (`_get_device_index(None, True)`): a failure in replica 1 reads "on device 0". Ours says and
    does the same, for given devices, None entries and a caller inside a device context."""
    want = _apply_outcome(torch_parallel_apply, devices, current, fail)
    got = _apply_outcome(simulated.parallel_apply, devices, current, fail)
    assert got == want
    if devices is None:
        device = 0 if current is None else current
        assert want[1] == [device] * 3
        assert want[0] == (None if fail is None else f"Caught ValueError in replica 1 on device {device}.")


def test_data_parallel_names_its_own_device_ids():
    """SimulatedDataParallel passes its device ids, so its errors name those, as DataParallel's do."""
    seen: dict[int, int | None] = {}

    class Fails(nn.Module):
        def forward(self, x):
            seen[len(seen)] = current_device()
            if current_device() == 3:
                raise ValueError("broke")
            return x

    with pytest.raises(ValueError, match="Caught ValueError in replica 1 on device 3"):
        dp(Fails(), device_ids=[7, 3, 4])(torch.randn(9, 5))
    assert sorted(seen.values()) == [3, 4, 7]


# ---------------------------------------------------------------- no reference cycles

def collected(actions, times: int = 2) -> list:
    """The objects only the garbage collector could free after running `actions` `times` times."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(times):
            for action in actions:
                action()
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()


class TupleInDictOut(nn.Module):
    """Takes a (tensor, str) tuple and a tensor keyword; returns a dict holding a tuple."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(5, 2)

    def forward(self, pair, scale=None):
        x, _ = pair
        return {"out": self.linear(x) * scale, "aux": (x.sum(1), None)}


def _forward_backward_calls(k: int) -> list:
    linear, structured = dp(nn.Linear(5, 2), k), dp(TupleInDictOut(), k)

    def tensors():
        linear(torch.randn(9, 5, requires_grad=True)).sum().backward()

    def structures():
        out = structured((torch.randn(9, 5), "tag"), scale=torch.rand(9, 1))
        (out["out"].sum() + out["aux"][0].sum()).backward()

    def no_grad():
        with torch.no_grad():
            linear(torch.randn(9, 5))

    return [tensors, structures, no_grad]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_forward_and_backward_leave_no_garbage(k):
    """scatter, replicate, parallel_apply, gather and backward make no reference cycle: after tensor,
    tuple, dict and keyword inputs, with and without grad, the garbage collector finds nothing."""
    assert [o for o in collected(_forward_backward_calls(k)) if _of_a_step(o)] == []


def _of_a_step(thing) -> bool:
    """Whether a collected object is a step's making (a tensor, a module, or a function or frame of torch's
    nn.parallel or of dpviz's DataParallel): another thread of this process (a page's forkserver starting its second
    stage) may leave garbage of its own while the step runs."""
    if isinstance(thing, (torch.Tensor, nn.Module)):
        return True
    # A function's or a frame's code, read by type: getattr on a mock's call (garbage another test may leave) makes
    # up any attribute asked for
    code = thing.__code__ if isinstance(thing, types.FunctionType) else \
        thing.f_code if isinstance(thing, types.FrameType) else None
    return code is not None and any(part in code.co_filename for part in ("torch/nn/parallel", "dpviz/engines/dp"))


def test_failing_replica_leaves_the_cycle_torch_leaves(torch_parallel_apply):
    """torch's ExceptionWrapper.reraise raises a local variable, so the exception, its traceback and
    reraise's frame form a cycle (torch/_utils.py). torch's parallel_apply leaves it; ours leaves the
    same one, and nothing torch's doesn't."""

    def summary(garbage):
        frames = sorted(o.f_code.co_name for o in garbage if isinstance(o, types.FrameType))
        return frames, sum(isinstance(o, ValueError) for o in garbage), {type(o).__name__ for o in garbage}

    want_frames, want_errors, want_types = summary(collected([lambda: _apply_outcome(torch_parallel_apply, None, None)]))
    got_frames, got_errors, got_types = summary(collected([lambda: _apply_outcome(simulated.parallel_apply, None, None)]))
    assert "reraise" in want_frames and want_errors == 2  # one re-raised error per call
    assert (got_frames, got_errors) == (want_frames, want_errors)
    assert got_types <= want_types


def test_failing_data_parallel_call_leaves_only_the_reraise_cycle():
    """A DataParallel call whose replica fails leaves only what re-raising it through torch's
    ExceptionWrapper leaves: one error per call, held in a cycle with reraise's frame."""

    class Fails(nn.Module):
        def forward(self, x):
            if current_device() == 1:
                raise ValueError("broke")
            return x

    model = dp(Fails(), 3)

    def call():
        try:
            model(torch.randn(9, 5))
        except ValueError:
            pass

    garbage = collected([call])
    assert sum(isinstance(o, ValueError) for o in garbage) == 2
    assert not any(getattr(o, "__name__", None) in ("scatter_map", "gather_map") for o in garbage)
    assert "reraise" in {o.f_code.co_name for o in garbage if isinstance(o, types.FrameType)}

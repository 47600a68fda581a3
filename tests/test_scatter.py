"""dpviz.engines.dp.scatter against PyTorch's own scatter/gather code as the oracle.

The oracle is torch.nn.parallel.scatter_gather itself (its real scatter, scatter_kwargs and gather),
with only the module-level names `Scatter` and `Gather` (the autograd Functions that move tensors
between GPUs, and refuse CPU tensors) replaced by CPU stand-ins for the duration of one test.
"""
from __future__ import annotations

import ast
import gc
import inspect
import re
import textwrap
import types
import warnings
from collections import OrderedDict, namedtuple
from dataclasses import dataclass
from typing import NamedTuple

import pytest
import torch
import torch.nn.parallel._functions as torch_functions
import torch.nn.parallel.scatter_gather as torch_sg

from dpviz.engines.dp import scatter as ours


def torch_scalar_warning() -> str:
    """The message of the warnings.warn call in torch's Gather.forward (adjacent literals joined by ast)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(torch_functions.Gather)))
    calls = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
    ]
    assert len(calls) == 1, "torch's Gather.forward no longer has exactly one warnings.warn call"
    message = calls[0].args[0]
    assert isinstance(message, ast.Constant) and isinstance(message.value, str)
    return message.value


class _CpuScatter:
    """Scatter.apply without the device copies: comm.scatter with chunk_sizes=None is tensor.chunk."""

    @staticmethod
    def apply(target_gpus, chunk_sizes, dim, tensor):
        return tensor.chunk(len(target_gpus), dim)


class _CpuGather:
    """Gather.apply without the device copies: the scalar rule of Gather.forward, then concatenation."""

    @staticmethod
    def apply(target_device, dim, *tensors):
        if all(t.dim() == 0 for t in tensors) and dim == 0:
            tensors = tuple(t.view(1) for t in tensors)
            warnings.warn(torch_scalar_warning())
        return torch.cat(tensors, dim)


@pytest.fixture
def oracle(monkeypatch):
    """torch.nn.parallel.scatter_gather with its Scatter/Gather swapped for the CPU stand-ins."""
    monkeypatch.setattr(torch_sg, "Scatter", _CpuScatter)
    monkeypatch.setattr(torch_sg, "Gather", _CpuGather)
    return torch_sg


def assert_same(got, want):
    """Same structure, same types, equal tensors, and the very same object for every other leaf."""
    assert type(got) is type(want), f"{type(got)} != {type(want)}"
    if isinstance(want, torch.Tensor):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert torch.equal(got, want)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            assert_same(got[key], want[key])
    else:
        assert got is want


def devices(k: int) -> list[int]:
    return list(range(k))


def garbage_left(actions, times: int = 2) -> int:
    """How many objects of scatter's and gather's making (their functions and frames, and tensors) only the garbage
    collector could free after running each of `actions` `times` times. Counted by kind, not all that was
    collected: another thread of this process (a page's forkserver starting its second stage) may leave garbage of
    its own meanwhile."""
    return sum(map(_made_here, collected(actions, times)))


_SCATTER_FILES = {torch_sg.__file__, ours.__file__}


def _made_here(thing) -> bool:
    if isinstance(thing, torch.Tensor):
        return True
    # A function's or a frame's code, read by type: getattr on a mock's call (garbage another test may leave) makes
    # up any attribute asked for
    code = thing.__code__ if isinstance(thing, types.FunctionType) else \
        thing.f_code if isinstance(thing, types.FrameType) else None
    return code is not None and code.co_filename in _SCATTER_FILES


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


Pair = namedtuple("Pair", "a b")


class Typed(NamedTuple):
    x: torch.Tensor
    tag: str


@dataclass
class Holder:
    t: torch.Tensor


# ---------------------------------------------------------------- chunk sizes

def test_chunk_sizes_match_torch_chunk_on_grid():
    """chunk_sizes(N, K) is the row count of each torch.chunk piece, for N in 0..64 and K in 1..16."""
    for n in range(65):
        for k in range(1, 17):
            assert ours.chunk_sizes(n, k) == [c.shape[0] for c in torch.empty(n).chunk(k)], (n, k)


@pytest.mark.parametrize("n,k,table", [
    (30, 2, [15, 15]), (30, 3, [10] * 3), (30, 8, [4] * 7 + [2]), (10, 2, [5, 5]), (10, 3, [4, 4, 2]),
    (10, 8, [2] * 5), (4, 8, [1] * 4), (1, 8, [1]), (0, 2, [0, 0]), (0, 8, [0] * 8), (5, 4, [2, 2, 1]),
    (13, 6, [3, 3, 3, 3, 1]), (17, 8, [3] * 5 + [2]), (100, 8, [13] * 7 + [9]),
])
def test_chunk_sizes_fact_sheet_table(n, k, table):
    """Each row of the fact sheet's §2 table holds for torch.chunk, and chunk_sizes agrees with torch."""
    torch_sizes = [c.shape[0] for c in torch.empty(n).chunk(k)]
    assert torch_sizes == table
    assert ours.chunk_sizes(n, k) == torch_sizes


# ---------------------------------------------------------------- scatter: one tensor

@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_tensor_is_torch_chunk(oracle, k, dim):
    """One tensor is split as tensor.chunk(K, dim), along dim 0, 1 and -1, like torch's scatter."""
    t = torch.randn(10, 7, 5)
    got = ours.scatter(t, devices(k), dim)
    assert_same(got, t.chunk(k, dim))
    assert_same(got, oracle.scatter(t, devices(k), dim))


def test_scatter_copies_every_chunk_but_the_first():
    """comm.scatter copies a chunk unless it already sits on the input's device (device_ids[0] here)."""
    t = torch.randn(10, 3)
    chunks = ours.scatter(t, devices(3))
    base = t.untyped_storage().data_ptr()
    assert [c.untyped_storage().data_ptr() == base for c in chunks] == [True, False, False]


@pytest.mark.parametrize("k", [1, 3])
def test_scatter_zero_dim_tensor_raises_like_chunk(k):
    """A 0-dim tensor raises RuntimeError with the very message torch.chunk gives."""
    with pytest.raises(RuntimeError) as want:
        torch.tensor(1.0).chunk(k, 0)
    with pytest.raises(RuntimeError) as got:
        ours.scatter(torch.tensor(1.0), devices(k))
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("k", [1, 2, 8])
def test_scatter_empty_batch_gives_k_empty_chunks(oracle, k):
    """N=0 rows gives K empty chunks (ATen's special case), so every device gets a piece."""
    t = torch.empty(0, 3)
    got = ours.scatter((t,), devices(k))
    assert_same(got, oracle.scatter((t,), devices(k)))
    assert len(got) == k and all(piece[0].shape == (0, 3) for piece in got)


# ---------------------------------------------------------------- scatter: structures

def _structures():
    t, u, shared = torch.randn(10, 2), torch.arange(10.0), object()
    return {
        "tuple": (t, "s", 5, shared),
        "list": [t, u, None],
        "dict": {"x": t, "k": 1},
        "ordered-dict": OrderedDict(b=u, a=t),
        "namedtuple": Pair(t, u),
        "typing-namedtuple": Typed(t, "tag"),
        "nested": {"a": (t, [u, {"c": t, "s": shared}]), "b": Pair(t, "z"), "c": [Typed(u, "q")]},
        "empties": ((), [], {}, t),
        "only-empty-tuple": (),
        "dataclass": (Holder(t), u),
        "only-non-tensors": ("hello",),
        "zip-truncation": (torch.randn(10, 2), torch.randn(4, 2)),
        "string-with-tensor": (t, "s"),
    }


@pytest.mark.parametrize("k", [1, 2, 3, 8])
@pytest.mark.parametrize("name", list(_structures()))
def test_scatter_structures_match_torch(oracle, name, k):
    """Tuples, lists, dicts, namedtuples and nested mixes scatter exactly as torch's scatter_map does."""
    obj = _structures()[name]
    assert_same(ours.scatter(obj, devices(k)), oracle.scatter(obj, devices(k)))


def test_scatter_shares_non_tensors_by_identity():
    """Non-tensor leaves (objects, str, None, empty containers) are the same object in every piece."""
    marker, empty = object(), []
    pieces = ours.scatter((torch.randn(9, 2), marker, "s", None, empty), devices(3))
    assert len(pieces) == 3
    for piece in pieces:
        assert piece[1] is marker and piece[2] == "s" and piece[3] is None and piece[4] is empty


def test_scatter_does_not_split_a_dataclass(oracle):
    """A dataclass holding a tensor is not split: every replica gets the whole-batch object."""
    holder = Holder(torch.randn(10, 2))
    got = ours.scatter((holder,), devices(4))
    assert_same(got, oracle.scatter((holder,), devices(4)))
    assert len(got) == 4 and all(piece[0] is holder for piece in got)


def test_scatter_zip_truncation_drops_rows(oracle):
    """(a[10 rows], b[4 rows]) on 8 devices: the shortest piece list wins and a's last chunk is dropped."""
    a, b = torch.randn(10, 2), torch.randn(4, 2)
    got = ours.scatter((a, b), devices(8))
    assert_same(got, oracle.scatter((a, b), devices(8)))
    assert len(got) == min(len(a.chunk(8)), len(b.chunk(8)))
    assert sum(piece[0].shape[0] for piece in got) < a.shape[0]


def test_scatter_only_non_tensors_gives_k_pieces(oracle):
    """("hello",) has nothing to split, so it yields one piece per device (K replicas)."""
    got = ours.scatter(("hello",), devices(5))
    assert_same(got, oracle.scatter(("hello",), devices(5)))
    assert len(got) == 5


# ---------------------------------------------------------------- scatter_kwargs

def _kwargs_cases():
    x30, x10, x1 = torch.randn(30, 3), torch.randn(10, 3), torch.randn(1, 3)
    return {
        "no-kwargs": ((x10,), {}, 3),
        "none-kwargs": ((x10,), None, 3),
        "scalar-kwarg": ((x10,), {"delta": 3}, 3),
        "tensor-kwarg": ((x10, "s"), {"y": torch.randn(10)}, 3),
        "kwargs-only": ((), {"x": x10}, 4),
        "nothing": ((), {}, 2),
        "quirk-more-kwargs": ((x1,), {"delta": 3}, 2),
        "quirk-fewer-kwargs": ((x30,), {"m": torch.randn(4, 3)}, 3),
        "two-positional-fewer-kwargs": ((x10, x10), {"m": torch.randn(2)}, 3),
    }


@pytest.mark.parametrize("name", list(_kwargs_cases()))
def test_scatter_kwargs_matches_torch(oracle, name):
    """scatter_kwargs splits and pads inputs and kwargs exactly as torch's scatter_kwargs does."""
    inputs, kwargs, k = _kwargs_cases()[name]
    assert_same(ours.scatter_kwargs(inputs, kwargs, devices(k)), oracle.scatter_kwargs(inputs, kwargs, devices(k)))


def test_scatter_kwargs_more_kwargs_pieces_pads_inputs_with_empty_tuple(oracle):
    """1-row x with delta=3 on 2 devices gives inputs ((x,), ()) and two kwargs dicts (facts §4)."""
    x = torch.randn(1, 3)
    inputs, kwargs = ours.scatter_kwargs((x,), {"delta": 3}, devices(2))
    assert_same((inputs, kwargs), oracle.scatter_kwargs((x,), {"delta": 3}, devices(2)))
    assert len(inputs) == 2 and inputs[1] == () and torch.equal(inputs[0][0], x)
    assert kwargs == ({"delta": 3}, {"delta": 3})


def test_scatter_kwargs_fewer_kwargs_pieces_are_not_padded(oracle):
    """30-row x with a 4-row kwarg on 3 devices gives 3 inputs but only 2 kwargs (len(inputs) quirk)."""
    x, m = torch.randn(30, 3), torch.randn(4, 3)
    inputs, kwargs = ours.scatter_kwargs((x,), {"m": m}, devices(3))
    assert_same((inputs, kwargs), oracle.scatter_kwargs((x,), {"m": m}, devices(3)))
    assert (len(inputs), len(kwargs)) == (len(x.chunk(3)), len(m.chunk(3)))
    assert len(inputs) > len(kwargs)


# ---------------------------------------------------------------- gather

def _gather_cases():
    a, b, c = torch.randn(4, 3), torch.randn(4, 3), torch.randn(2, 3)
    w, v = torch.randn(3, 4), torch.randn(3, 1)
    return {
        "tensors-dim0": ([a, b, c], 0),
        "tensors-dim1": ([w, v], 1),
        "tensors-dim-1": ([w, v], -1),
        "single-replica": ([a], 0),
        "dict": ([{"y": a, "z": a[:, 0]}, {"y": c, "z": c[:, 0]}], 0),
        "namedtuple": ([Pair(a, a.sum(1)), Pair(c, c.sum(1))], 0),
        "typing-namedtuple": ([Typed(a, None), Typed(c, None)], 0),
        "none": ([None, None, None], 0),
        "none-only-replica-0-checked": ([None, a], 0),
        "nested": ([(a, [b, (c, None)]), (c, [a, (b, None)])], 0),
        "nested-dim1": ([[w, {"k": w}], [v, {"k": v}]], 1),
    }


@pytest.mark.parametrize("name", list(_gather_cases()))
def test_gather_matches_torch(oracle, name):
    """gather concatenates in replica order and rebuilds dict/namedtuple/tuple/list/None as torch does."""
    outputs, dim = _gather_cases()[name]
    assert_same(ours.gather(outputs, dim), oracle.gather(outputs, 0, dim))


def test_gather_is_inverse_of_scatter():
    """Scattering then gathering a nested structure returns the original tensors."""
    t = torch.randn(11, 2)
    got = ours.gather(ours.scatter([{"t": t, "u": (t * 2,)}], devices(4)), 0)
    assert torch.equal(got[0]["t"], t) and torch.equal(got[0]["u"][0], t * 2)


def test_scalar_warning_text_is_torchs():
    """SCALAR_GATHER_WARNING is the literal message of torch's Gather.forward."""
    assert ours.SCALAR_GATHER_WARNING == torch_scalar_warning()


@pytest.mark.parametrize("k", [1, 3])
def test_gather_scalars_warns_and_returns_vector(oracle, k):
    """All 0-dim outputs on dim 0 warn with torch's text and become a vector of length = replicas."""
    outputs = [torch.tensor(float(i)) for i in range(k)]
    with pytest.warns(UserWarning, match=re.escape(torch_scalar_warning())):
        got = ours.gather(outputs, 0)
    with pytest.warns(UserWarning):
        want = oracle.gather(outputs, 0, 0)
    assert_same(got, want)
    assert got.shape == (k,)


def test_gather_dicts_with_different_key_counts(oracle):
    """Dicts with different key counts raise ValueError("All dicts must have the same number of keys")."""
    outputs = [{"a": torch.ones(1)}, {"a": torch.ones(1), "b": torch.ones(1)}]
    with pytest.raises(ValueError) as want:
        oracle.gather(outputs, 0, 0)
    with pytest.raises(ValueError) as got:
        ours.gather(outputs, 0)
    assert str(got.value) == str(want.value) == "All dicts must have the same number of keys"


def test_gather_int_leaf_raises_type_error_like_torch(oracle):
    """A non-tensor int leaf is unsupported: the same TypeError as torch's gather."""
    outputs = [(torch.ones(1), 1), (torch.ones(1), 2)]
    with pytest.raises(TypeError) as want:
        oracle.gather(outputs, 0, 0)
    with pytest.raises(TypeError) as got:
        ours.gather(outputs, 0)
    assert str(got.value) == str(want.value)


def test_gather_str_leaf_becomes_map_repr(oracle):
    """A str leaf is "gathered" into the repr of a map object, as torch's gather does (facts §7)."""
    got, want = ours.gather(["ab", "cd"], 0), oracle.gather(["ab", "cd"], 0, 0)
    assert type(got) is type(want) is str
    assert got.startswith("<map object at ") and want.startswith("<map object at ")


# ---------------------------------------------------------------- no reference cycles

def _scatter_calls(scatter, scatter_kwargs, gather) -> list:
    """Every scatter, scatter_kwargs and gather case of this file, as calls to the given functions."""
    calls = [lambda obj=obj, k=k: scatter(obj, devices(k)) for obj in _structures().values() for k in (1, 3)]
    calls += [lambda case=case: scatter_kwargs(case[0], case[1], devices(case[2])) for case in _kwargs_cases().values()]
    calls += [lambda case=case: gather(*case) for case in _gather_cases().values()]
    return calls


def test_scatter_and_gather_leave_no_garbage_like_torch(oracle):
    """The recursive closures of scatter and gather are cut after use, as torch's are (`finally:
    scatter_map = None`, `gather_map = None` in scatter_gather.py): for every structure above, neither
    torch's code nor ours leaves anything for the garbage collector."""
    torch_calls = _scatter_calls(oracle.scatter, oracle.scatter_kwargs, lambda outputs, dim: oracle.gather(outputs, 0, dim))
    assert garbage_left(torch_calls) == 0
    assert garbage_left(_scatter_calls(ours.scatter, ours.scatter_kwargs, ours.gather)) == 0


def test_failing_scatter_and_gather_leave_no_garbage_like_torch(oracle):
    """A scatter that raises (0-dim tensor) or a gather that raises (dicts of different sizes) leaves
    nothing behind either, in torch's code and ours."""

    def fails(call, error):
        def run():
            try:
                call()
            except error:
                pass
        return run

    scalar, dicts = (torch.ones(2), torch.tensor(1.0)), [{"a": torch.ones(1)}, {"a": torch.ones(1), "b": 1}]
    for scatter, gather in ((oracle.scatter, lambda o: oracle.gather(o, 0, 0)), (ours.scatter, lambda o: ours.gather(o, 0))):
        calls = [fails(lambda: scatter(scalar, devices(2)), RuntimeError), fails(lambda: gather(dicts), ValueError)]
        assert garbage_left(calls) == 0

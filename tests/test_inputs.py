"""The input forms of dpviz.engines.workload.input_forms: what the trace says each replica received, against PyTorch.

The oracle is torch's own torch.nn.parallel.scatter_gather.scatter_kwargs, with only its
device-moving Scatter/Gather Functions swapped for the CPU stand-ins of tests/test_scatter.py. For
batch 0 and the last batch of a recorded run (the batches rebuilt from the same seed), every tensor
the oracle hands a replica must be recorded with its shape as "split", every other leaf as "shared"
when it is the caller's very object and "copied" when scatter rebuilt it, and the replicas recorded
must be the oracle's. dpviz.engines.dp.split_rules.replica_rows (plain integers) must give the oracle's
rows per replica for every form, rows 0..20 and 1..8 devices.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import pytest
import torch
import torch.nn.parallel.scatter_gather as torch_sg

from dpviz import record
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.dp.split_rules import replica_rows
from dpviz.config import INPUTS, RunConfig
from dpviz.engines.workload.input_forms import LABELS, POSITIONAL
from dpviz.engines.workload.models import HIDDEN, row_shape
from test_scatter import _CpuGather, _CpuScatter

# A model each form suits: the hidden state needs a GRU; the time-first GRU splits every form on dim 1.
# The catalogue's forms (INPUTS): a user's own example batch is tested in test_own_model.
CASES = [(form, "linear") for form in INPUTS if form != "hidden"]
CASES += [(form, "gru_dim1") for form in INPUTS] + [("hidden", "gru")]


@pytest.fixture
def oracle(monkeypatch):
    """torch.nn.parallel.scatter_gather with its Scatter/Gather swapped for the CPU stand-ins."""
    monkeypatch.setattr(torch_sg, "Scatter", _CpuScatter)
    monkeypatch.setattr(torch_sg, "Gather", _CpuGather)
    return torch_sg


def config_for(form: str, model: str, gpus: int = 3, **settings) -> RunConfig:
    # 20 rows in batches of 8: batches of 8, 8 and 4, so the last one splits differently on 3 devices.
    values = dict(inputs=form, model=model, gpus=gpus, data_size=20, batch_size=8, backend="simulated")
    return RunConfig(**{**values, **settings})


def calls_of(config: RunConfig) -> list[tuple[list[int], tuple, dict]]:
    """(dataset ids, args, kwargs) of every DataParallel call of a run, rebuilt from its seed."""
    _, loader = tutorial.build(config)
    out = []
    for data, indices in loader:
        ids = indices.tolist()
        out.append((ids, *tutorial.call(config, data, ids)))
    return out


def leaves(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path, leaf) in the order scatter walks an argument. A container with no tensor inside is one
    leaf: scatter hands it over whole (or rebuilt whole), it does not split it."""
    def has_tensor(o: Any) -> bool:
        if isinstance(o, torch.Tensor):
            return True
        items = o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
        return any(has_tensor(i) for i in items)

    if isinstance(obj, dict) and has_tensor(obj):
        for key, value in obj.items():
            yield from leaves(value, f"{path}[{key!r}]")
    elif isinstance(obj, (list, tuple)) and has_tensor(obj):
        for i, value in enumerate(obj):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path, obj


def all_leaves(args: tuple, kwargs: dict, names: tuple[str, ...]) -> list[tuple[str, Any]]:
    out = [leaf for name, arg in zip(names, args) for leaf in leaves(arg, name)]
    return out + [leaf for key, value in kwargs.items() for leaf in leaves(value, f"{key}=")]


def expected(args: tuple, kwargs: dict, piece: tuple, kwarg_piece: dict, names: tuple[str, ...]) -> list[tuple]:
    """(path, shape, mode) of every leaf the oracle gave one replica."""
    original = dict(all_leaves(args, kwargs, names))
    out = []
    for path, leaf in all_leaves(piece, kwarg_piece, names):
        if isinstance(leaf, torch.Tensor):
            out.append((path, list(leaf.shape), "split"))
        else:
            shape = [len(leaf)] if isinstance(leaf, (list, tuple, dict)) else []
            out.append((path, shape, "shared" if leaf is original[path] else "copied"))
    return out


def recorded(trace, batch: int) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for a in trace.arguments:
        if a.batch == batch:
            out.setdefault(a.replica, []).append((a.path, a.shape, a.mode))
    return out


def first_tensor(obj: Any) -> torch.Tensor | None:
    """The first tensor scatter meets in a piece (tuples, lists and dict values, in order)."""
    if isinstance(obj, torch.Tensor):
        return obj
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return next((t for t in map(first_tensor, items) if t is not None), None)


# ---------------------------------------------------------------- what the trace records

@pytest.fixture(scope="module")
def traces():
    return {case: record(config_for(*case)) for case in CASES}


@pytest.mark.parametrize("form,model", CASES)
def test_recorded_arguments_are_what_torch_hands_each_replica(oracle, traces, form, model):
    """Batch 0 and the last recorded batch: every replica's arguments and the number of replicas."""
    config, trace = config_for(form, model), traces[(form, model)]
    calls = calls_of(config)
    assert [b.sample_ids for b in trace.batches] == [ids for ids, _, _ in calls[: len(trace.batches)]]
    names = POSITIONAL[form]
    for batch in sorted({0, len(trace.batches) - 1}):
        _, args, kwargs = calls[batch]
        pieces, kwarg_pieces = oracle.scatter_kwargs(args, kwargs, list(range(config.gpus)), config.dim)
        got = recorded(trace, batch)
        assert sorted(got) == list(range(len(pieces))), f"replicas of batch {batch}"
        for i, (piece, kwarg_piece) in enumerate(zip(pieces, kwarg_pieces)):
            assert got[i] == expected(args, kwargs, piece, kwarg_piece, names), f"batch {batch}, replica {i}"
    lanes = {a.replica: a.lane for a in trace.arguments}
    assert all(lane == replica for replica, lane in lanes.items())


def test_the_float_keyword_is_the_callers_own_object(oracle, traces):
    """scale=0.5 reaches every replica by reference: recorded as shared, on every device, even those
    whose positional arguments ran out."""
    config, trace = config_for("kwargs", "linear"), traces[("kwargs", "linear")]
    _, args, kwargs = calls_of(config)[-1]
    _, kwarg_pieces = oracle.scatter_kwargs(args, kwargs, list(range(config.gpus)), config.dim)
    assert all(piece["scale"] is kwargs["scale"] for piece in kwarg_pieces)
    got = recorded(trace, len(trace.batches) - 1)
    assert sorted(got) == list(range(config.gpus))
    assert all(("scale=", [], "shared") in args for args in got.values())


@pytest.mark.parametrize("model", ["linear", "gru_dim1"])
def test_the_row_id_list_is_rebuilt_whole_for_every_replica(oracle, traces, model):
    """A Python list is not split: scatter rebuilds it for every replica with all of the batch's ids,
    a new list each time, recorded as copied with the batch's length."""
    config, trace = config_for("list", model), traces[("list", model)]
    for batch, (ids, args, kwargs) in enumerate(calls_of(config)):
        if batch not in {0, len(trace.batches) - 1}:
            continue
        pieces, _ = oracle.scatter_kwargs(args, kwargs, list(range(config.gpus)), config.dim)
        assert all(piece[1] == ids and piece[1] is not args[1] for piece in pieces)
        got = recorded(trace, batch)
        assert [args[-1] for _, args in sorted(got.items())] == [("row_ids", [len(ids)], "copied")] * len(pieces)
        assert len(pieces) == len(args[0].chunk(config.gpus, config.dim)) < len(ids)


def test_a_failing_batch_records_what_its_replicas_got(oracle, traces):
    """The time-first h0 fails on dim 0 (model gru): its one batch's arguments are still recorded."""
    config, trace = config_for("hidden", "gru"), traces[("hidden", "gru")]
    assert trace.failure is not None and trace.failure.batch == 0
    _, args, kwargs = calls_of(config)[0]
    pieces, kwarg_pieces = oracle.scatter_kwargs(args, kwargs, list(range(config.gpus)), config.dim)
    assert recorded(trace, 0) == {
        i: expected(args, kwargs, p, k, POSITIONAL["hidden"]) for i, (p, k) in enumerate(zip(pieces, kwarg_pieces))
    }


# ---------------------------------------------------------------- replica_rows

def oracle_rows(oracle, config: RunConfig, rows: int) -> list[int]:
    """Rows of each replica's first tensor in torch's scatter_kwargs pieces of a real `rows`-row batch."""
    data = torch.zeros(rows, *row_shape(config.model, config.input_size))
    args, kwargs = tutorial.call(config, data, list(range(rows)))
    pieces, _ = oracle.scatter_kwargs(args, kwargs, list(range(config.gpus)), config.dim)
    firsts = [first_tensor(piece) for piece in pieces]
    return [t.shape[config.dim] if t is not None else 0 for t in firsts]


@pytest.mark.parametrize("form,model", CASES)
def test_replica_rows_is_torchs_split_for_every_form(oracle, form, model):
    """replica_rows(config, rows) == the oracle's rows per replica, rows 0..20, 1..8 devices."""
    for gpus in range(1, 9):
        config = dataclasses.replace(config_for(form, model), gpus=gpus)
        for rows in range(21):
            assert replica_rows(config, rows) == oracle_rows(oracle, config, rows), (gpus, rows)


def test_replica_rows_shows_the_forms_quirks(oracle):
    """The quirks come from torch: padded keyword replicas get no rows; h0 cut on dim 0 keeps one replica."""
    kwargs_config = config_for("kwargs", "linear", gpus=8)
    chunks = [c.shape[0] for c in torch.empty(10).chunk(8)]
    rows = replica_rows(kwargs_config, 10)
    assert rows == oracle_rows(oracle, kwargs_config, 10)
    assert len(rows) == 8 > len(chunks) and rows[: len(chunks)] == chunks and not any(rows[len(chunks):])

    hidden_config = config_for("hidden", "gru", gpus=4)
    h0_pieces = torch.empty(1, 10, HIDDEN).chunk(4, 0)
    rows = replica_rows(hidden_config, 10)
    assert rows == oracle_rows(oracle, hidden_config, 10)
    assert len(rows) == len(h0_pieces) == 1 and rows[0] == torch.empty(10).chunk(4)[0].shape[0]

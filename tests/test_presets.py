"""The pitfall presets (dpviz.presets) recorded on simulated devices, against PyTorch itself.

Each preset is run once with dpviz.record. Its batches are then rebuilt from the same seed
(dpviz.engines.workload.tutorial_data.build and call) and handed to the oracle, torch's own
torch.nn.parallel.scatter_gather with only its device-moving Scatter/Gather Functions swapped for
the CPU stand-ins of tests/test_scatter.py, and to the module itself, called directly on the pieces
torch gives each replica. What the trace says (the failure, its replica and message, warnings, the
model's state, replicas per batch) must be what torch says; the JSON file and the explanations must
carry the same numbers; a ?preset= link must open the preset.
"""
from __future__ import annotations

import dataclasses
import re

import pytest
import torch
import torch.nn.parallel.scatter_gather as torch_sg

from dpviz import record
from dpviz.trace import json_io as trace_json
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.engines.dp.read.explain_pitfalls import pitfalls
from dpviz.engines.workload.input_forms import POSITIONAL
from dpviz.presets import PRESETS, preset_of
from dpviz.page.link import from_query
from test_scatter import _CpuGather, _CpuScatter, torch_scalar_warning


@pytest.fixture
def oracle(monkeypatch):
    """torch.nn.parallel.scatter_gather with its Scatter/Gather swapped for the CPU stand-ins."""
    monkeypatch.setattr(torch_sg, "Scatter", _CpuScatter)
    monkeypatch.setattr(torch_sg, "Gather", _CpuGather)
    return torch_sg


@pytest.fixture(scope="module")
def traces():
    """Every preset recorded once (simulated devices: this machine has no GPUs for them)."""
    return {name: record(dataclasses.replace(p.config, backend="simulated")) for name, p in PRESETS.items()}


@dataclasses.dataclass
class Rebuilt:
    """A preset's model and batches rebuilt from its seed: what the run's loop handed DataParallel."""

    model: torch.nn.Module
    ids: list[list[int]]
    data: list[torch.Tensor]  # each batch as the model takes it (time first for gru_dim1)
    calls: list[tuple[tuple, dict]]  # (args, kwargs) of each DataParallel call


def rebuild(config) -> Rebuilt:
    model, loader = tutorial.build(config)
    ids, data, calls = [], [], []
    for batch, indices in loader:
        ids.append(indices.tolist())
        data.append(tutorial.model_input(config, batch))
        calls.append(tutorial.call(config, batch, ids[-1]))
    return Rebuilt(model, ids, data, calls)


def devices(config) -> list[int]:
    return list(range(config.gpus))


def chunk_rows(x: torch.Tensor, config) -> list[int]:
    """torch's answer to how many rows each used device gets of batch x."""
    return [c.shape[config.dim] for c in x.chunk(config.gpus, config.dim)]


def raised(call) -> BaseException:
    """The exception call() raises (it must raise)."""
    with pytest.raises(Exception) as info:
        call()
    return info.value


def last_line(error: BaseException) -> str:
    """The last line Python prints for an uncaught `error`."""
    return f"{type(error).__name__}: {error}"


def arguments(trace, batch: int) -> dict[int, list]:
    """The recorded arguments of one batch, by replica."""
    out: dict[int, list] = {}
    for a in trace.arguments:
        if a.batch == batch:
            out.setdefault(a.replica, []).append(a)
    return out


def numbers(text: str) -> set[int]:
    """Every whole number written in a text (thousands separators allowed)."""
    return {int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", text)}


def rounded(trace):
    """The trace with its times at the 0.1 us the file keeps (as tests/test_trace_json.py)."""
    spans = [dataclasses.replace(s, start=round(s.start, 7), end=round(s.end, 7)) for s in trace.spans]
    return dataclasses.replace(trace, spans=spans)


def test_rebuilt_batches_are_the_recorded_ones(traces):
    """The oracle sees the very batches the runs saw: same seed, same rows in the same order."""
    for name, preset in PRESETS.items():
        trace = traces[name]
        rebuilt = rebuild(preset.config)
        assert [b.sample_ids for b in trace.batches] == rebuilt.ids[: len(trace.batches)], name


# ---------------------------------------------------------------- kwargs-small-batch

def test_kwargs_small_batch_fails_where_torch_pads_positional_args(oracle, traces):
    """The last batch makes fewer chunks of x than devices; scatter_kwargs pads those replicas' positional
    args with (), and the first such replica fails with the module's own TypeError."""
    config, trace = PRESETS["kwargs-small-batch"].config, traces["kwargs-small-batch"]
    rebuilt = rebuild(config)
    args, kwargs = rebuilt.calls[-1]
    pieces, kwarg_pieces = oracle.scatter_kwargs(args, kwargs, devices(config), config.dim)
    padded = [i for i, piece in enumerate(pieces) if piece == ()]
    assert padded, "the preset's last batch must leave replicas without positional arguments"
    first = padded[0]
    want = raised(lambda: rebuilt.model(*pieces[first], **kwarg_pieces[first]))
    assert isinstance(want, TypeError)

    failure = trace.failure
    assert failure is not None
    assert (failure.type, failure.replica, failure.batch) == ("TypeError", first, len(rebuilt.calls) - 1)
    lines = failure.message.splitlines()
    assert lines[0] == f"Caught TypeError in replica {first} on device {first}."
    assert lines[-1] == last_line(want) == failure.original


def test_kwargs_small_batch_earlier_batches_completed(traces):
    """Every batch before the failing one produced the output the module gives on the whole batch."""
    config, trace = PRESETS["kwargs-small-batch"].config, traces["kwargs-small-batch"]
    rebuilt = rebuild(config)
    assert len(trace.batches) == len(rebuilt.calls) == config.num_batches
    with torch.no_grad():
        want = [list(rebuilt.model(*args, **kwargs).shape) for args, kwargs in rebuilt.calls[:-1]]
    assert [b.output_shape for b in trace.batches[:-1]] == want
    assert trace.batches[-1].output_shape == []  # the failing batch has no output


def test_kwargs_small_batch_records_the_keyword_alone(oracle, traces):
    """In the failing batch the padded replicas are recorded with the keyword only, shared; the others
    with x's chunk, as torch's scatter_kwargs hands them out."""
    config, trace = PRESETS["kwargs-small-batch"].config, traces["kwargs-small-batch"]
    args, kwargs = rebuild(config).calls[-1]
    pieces, kwarg_pieces = oracle.scatter_kwargs(args, kwargs, devices(config), config.dim)
    got = arguments(trace, trace.failure.batch)
    assert sorted(got) == list(range(len(pieces)))
    (name,) = POSITIONAL[config.inputs]
    for i, (piece, kwarg_piece) in enumerate(zip(pieces, kwarg_pieces)):
        want = [(name, list(t.shape), "split") for t in piece]
        want += [(f"{k}=", [], "shared" if v is kwargs[k] else "copied") for k, v in kwarg_piece.items()]
        assert [(a.path, a.shape, a.mode) for a in got[i]] == want, i
    assert [(a.path, a.mode) for a in got[trace.failure.replica]] == [(f"{k}=", "shared") for k in kwargs]


# ---------------------------------------------------------------- batchnorm-one-row

def test_batchnorm_one_row_fails_in_the_replica_with_one_row(traces):
    """The last batch's torch.chunk has a 1-row chunk; BatchNorm1d in training mode raises on it, and the
    run reports that very ValueError in that replica. The whole batch on one device is fine."""
    config, trace = PRESETS["batchnorm-one-row"].config, traces["batchnorm-one-row"]
    rebuilt = rebuild(config)
    x = rebuilt.data[-1]
    chunks = x.chunk(config.gpus, config.dim)
    one_row = [i for i, c in enumerate(chunks) if c.shape[config.dim] == 1]
    assert one_row, "the preset's last batch must have a 1-row chunk"
    model = rebuilt.model.train()
    want = raised(lambda: model(chunks[one_row[0]]))
    assert isinstance(want, ValueError)
    model(x)  # the whole batch normalises fine

    failure = trace.failure
    assert (failure.type, failure.replica, failure.batch) == ("ValueError", one_row[0], len(rebuilt.data) - 1)
    assert failure.message.splitlines()[0] == f"Caught ValueError in replica {one_row[0]} on device {one_row[0]}."
    assert failure.original == last_line(want)
    assert [s.rows for s in trace.replicas(failure.batch)] == chunk_rows(x, config)
    assert all(b.output_shape for b in trace.batches[:-1])


# ---------------------------------------------------------------- rnn-hidden-dim

def test_rnn_hidden_dim_one_piece_and_the_grus_own_error(oracle, traces):
    """h0's batch is on dim 1, but scatter cuts it on dim 0 into one piece: zip keeps one replica, and the
    GRU raises on that piece exactly what the run reports from replica 0."""
    config, trace = PRESETS["rnn-hidden-dim"].config, traces["rnn-hidden-dim"]
    rebuilt = rebuild(config)
    args, kwargs = rebuilt.calls[0]
    pieces, kwarg_pieces = oracle.scatter_kwargs(args, kwargs, devices(config), config.dim)
    assert len(pieces) == 1 < config.gpus
    want = raised(lambda: rebuilt.model(*pieces[0], **kwarg_pieces[0]))
    assert isinstance(want, RuntimeError)

    failure = trace.failure
    assert (failure.type, failure.replica, failure.batch) == ("RuntimeError", 0, 0)
    assert failure.message.splitlines()[0] == "Caught RuntimeError in replica 0 on device 0."
    assert failure.original == last_line(want)
    assert len(trace.batches) == 1
    assert len(trace.spans_of(0, "forward")) == 1
    recorded = arguments(trace, 0)
    assert sorted(recorded) == [0]
    assert [a.shape for a in recorded[0]] == [list(t.shape) for t in pieces[0]]


# ---------------------------------------------------------------- scalar-loss

def test_scalar_loss_warns_with_torchs_text_every_batch(traces):
    """Every batch gathers 0-dim losses: torch's Gather warning, once per batch, and a vector with one
    loss per replica used."""
    config, trace = PRESETS["scalar-loss"].config, traces["scalar-loss"]
    rebuilt = rebuild(config)
    assert trace.failure is None
    (note,) = trace.warnings
    assert (note.category, note.message, note.batch) == ("UserWarning", torch_scalar_warning(), 0)
    assert note.count == len(rebuilt.data) == len(trace.batches)
    assert [b.output_shape for b in trace.batches] == [[len(chunk_rows(x, config))] for x in rebuilt.data]


def test_scalar_loss_gathered_values_are_the_modules_loss_per_chunk(traces):
    """facts["losses"]: the gathered vector is the module's loss on each torch.chunk chunk, and "whole" its
    loss on the whole batch."""
    config, trace = PRESETS["scalar-loss"].config, traces["scalar-loss"]
    rebuilt = rebuild(config)
    losses = trace.facts["losses"]
    assert [entry["batch"] for entry in losses] == [0, len(rebuilt.data) - 1]
    with torch.no_grad():
        for entry in losses:
            x = rebuilt.data[entry["batch"]]
            chunks = x.chunk(config.gpus, config.dim)
            assert entry["chunk_rows"] == chunk_rows(x, config)
            assert entry["gathered"] == pytest.approx([float(rebuilt.model(c)) for c in chunks], rel=1e-6)
            assert entry["whole"] == pytest.approx(float(rebuilt.model(x)), rel=1e-6)


# ---------------------------------------------------------------- state-lost

def test_state_lost_counts_only_replica_zero(traces):
    """calls never moves (replicas rebind their own copy); rows_seen holds replica 0's chunks only."""
    config, trace = PRESETS["state-lost"].config, traces["state-lost"]
    rebuilt = rebuild(config)
    batches = len(rebuilt.data)
    state = trace.facts["state"]
    assert state["calls"] == [0, batches]
    chunk_zero = sum(chunk_rows(x, config)[0] for x in rebuilt.data)
    assert state["rows_seen"] == [chunk_zero, sum(len(ids) for ids in rebuilt.ids)]
    assert chunk_zero < state["rows_seen"][1]


def test_state_on_one_device_is_a_plain_loops():
    """With one device DataParallel calls the module itself: the counts are those of a plain loop."""
    config = dataclasses.replace(PRESETS["state-lost"].config, gpus=1, backend="simulated")
    trace = record(config)
    rebuilt = rebuild(config)
    with torch.no_grad():
        for args, kwargs in rebuilt.calls:
            rebuilt.model(*args, **kwargs)
    plain = [rebuilt.model.calls, int(rebuilt.model.rows_seen)]
    assert plain == [len(rebuilt.calls), config.data_size]
    assert trace.facts["state"] == {"calls": [plain[0]] * 2, "rows_seen": [plain[1]] * 2}


# ---------------------------------------------------------------- idle-gpus

def test_idle_gpus_replicas_follow_torch_chunk(traces):
    """Replicas per batch are len(torch.chunk(batch, gpus)); the short last batch leaves devices idle."""
    config, trace = PRESETS["idle-gpus"].config, traces["idle-gpus"]
    rebuilt = rebuild(config)
    assert len(trace.batches) == len(rebuilt.data)
    for batch, x in zip(trace.batches, rebuilt.data):
        replicas = trace.replicas(batch.index)
        assert [s.rows for s in replicas] == chunk_rows(x, config)
        assert [s.lane for s in replicas] == list(range(len(x.chunk(config.gpus, config.dim))))
    used = {s.lane for s in trace.replicas(trace.batches[-1].index)}
    idle = set(range(config.gpus)) - used
    assert idle == set(range(len(rebuilt.data[-1].chunk(config.gpus)), config.gpus))
    assert idle


# ---------------------------------------------------------------- files, explanations, links

@pytest.mark.parametrize("name", list(PRESETS))
def test_trace_round_trips_through_json(traces, name):
    """Failures, warnings, arguments and facts survive the trace file exactly."""
    trace = traces[name]
    loaded = trace_json.loads(trace_json.dumps(trace))
    assert loaded == rounded(trace)
    assert trace_json.dumps(loaded) == trace_json.dumps(trace)


def test_pitfalls_kwargs_names_the_replicas_without_positional_args(traces):
    trace = traces["kwargs-small-batch"]
    text = pitfalls(trace)[0]
    failure = trace.failure
    assert failure.headline in text and failure.original in text
    got = arguments(trace, failure.batch)
    (name,) = POSITIONAL[trace.config.inputs]
    empty = [r for r, args in sorted(got.items()) if not any(a.path == name for a in args)]
    assert empty[0] == failure.replica
    assert f"replicas {', '.join(map(str, empty))} " in text
    rows = trace.batches[failure.batch].rows
    assert {failure.batch, rows, len(got) - len(empty), len(trace.lanes)} <= numbers(text)


def test_pitfalls_batchnorm_names_the_split_and_the_one_row_gpu(traces):
    trace = traces["batchnorm-one-row"]
    text = pitfalls(trace)[0]
    failure = trace.failure
    rows = [s.rows for s in trace.replicas(failure.batch)]
    lane = trace.replicas(failure.batch)[failure.replica].lane
    assert failure.original in text
    assert f"split {', '.join(map(str, rows))} " in text
    assert f"GPU {lane}'s replica" in text
    assert {failure.batch, trace.batches[failure.batch].rows, len(trace.lanes)} <= numbers(text)


def test_pitfalls_rnn_names_the_hidden_shape_and_replica_count(traces):
    trace = traces["rnn-hidden-dim"]
    text = pitfalls(trace)[0]
    got = arguments(trace, 0)
    h0 = next(a for a in got[0] if a.path == "h0")
    x = next(a for a in got[0] if a.path == "x")
    assert trace.failure.original in text
    assert " × ".join(map(str, h0.shape)) in text
    assert {len(got), len(trace.lanes), x.shape[trace.dim], h0.shape[1]} <= numbers(text)


def test_pitfalls_scalar_loss_quotes_the_warning_and_the_losses(traces):
    trace = traces["scalar-loss"]
    (note,) = trace.warnings
    text = next(p for p in pitfalls(trace) if note.message in p)
    last = trace.facts["losses"][-1]
    assert f"{note.count} times" in text
    assert ", ".join(str(round(g, 4)) for g in last["gathered"]) in text
    assert f"{last['whole']:.4f}" in text
    assert f"{sum(last['gathered']) / len(last['gathered']):.4f}" in text


def test_pitfalls_state_lost_gives_the_counts(traces):
    trace = traces["state-lost"]
    text = pitfalls(trace)[0]
    (calls, batches), (rows, all_rows) = trace.facts["state"]["calls"], trace.facts["state"]["rows_seen"]
    forwards = len([s for s in trace.spans if s.phase == "forward"])
    assert f"`calls` is {calls:,}" in text
    assert f"{rows:,} of {all_rows:,} rows" in text
    assert {batches, forwards} <= numbers(text)


def test_pitfalls_idle_gpus_has_nothing_to_report(traces):
    """No failure, warning or state: the idle devices are the general explanations' business."""
    trace = traces["idle-gpus"]
    assert trace.failure is None and not trace.warnings and set(trace.facts) <= {"threads", "threads_at_once"}
    assert pitfalls(trace) == []


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_preset_link_opens_the_preset(name):
    config, warnings = from_query({"preset": name})
    assert warnings == []
    assert config == PRESETS[name].config
    assert preset_of(config) is PRESETS[name]

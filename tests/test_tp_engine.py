"""Tensor parallelism (dpviz.engines.tp) against torch: after every training step each rank holds the parameters of one
process trained on the same rows (SGD and Adam, ffn and the transformer, 2 and 4 ranks); each rank's slice of a cut
weight is torch.chunk's piece of the whole; the all-reduces the spans time are those torch's CommDebugMode counted,
module by module and pass by pass; the bytes handed to each are the activations' sizes; bad settings are one
sentence.
"""
from __future__ import annotations

import functools
from collections import Counter

import pytest
import torch

from dpviz.config import ConfigError, RunConfig
from dpviz.engines.ranks.launch import launch
from dpviz.engines.ranks.program import EVERY_STEP
from dpviz.engines.tp.merge import to_trace
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.figures.text_fit import unwrap
from dpviz.trace import json_io as trace_json

from test_ddp_engine import TOLERANCE, single_process

SETTINGS = {"ffn": dict(model="ffn"), "transformer": dict(model="transformer", input_size=11)}
CUT = {"colwise": 0, "rowwise": 1}  # the dim of a Linear's weight each style cuts


@functools.cache
def run(model: str, ranks: int, optimizer: str):
    config = RunConfig(engine="tp", gpus=ranks, train=True, optimizer=optimizer, batch_size=8, data_size=24,
                       **SETTINGS[model])
    launched = launch(config, keep_parameters=EVERY_STEP)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    return config, launched, trace


CASES = [(model, ranks, optimizer) for model in SETTINGS for ranks in (2, 4) for optimizer in ("sgd", "adam")]


@pytest.mark.parametrize("model, ranks, optimizer", CASES)
def test_every_rank_ends_equal_to_one_process_on_the_same_rows(model, ranks, optimizer):
    config, launched, trace = run(model, ranks, optimizer)
    assert trace.failure is None and launched["exit_codes"] == [0] * ranks and len(trace.batches) == 3
    assert all(batch.rows == 8 for batch in trace.batches)  # every rank read the whole batch
    parameters = [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
                  for report in launched["ranks"]]
    expected = single_process(config, trace)
    assert parameters[0].keys() == expected.keys()
    for name, value in parameters[0].items():
        for other in parameters[1:]:
            assert torch.equal(other[name], value), f"{name} differs between ranks"
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    untrained = dict(tutorial.build(config)[0].named_parameters())
    assert all(not torch.allclose(value, untrained[name]) for name, value in parameters[0].items()
               if name.endswith("weight"))  # it trained
    trace_json.loads(trace_json.dumps(trace))  # the engine's own check takes it


@pytest.mark.parametrize("model, ranks, optimizer", CASES)
def test_after_every_step_every_rank_holds_one_process_parameters(model, ranks, optimizer):
    """Not only at the end: each step's update, gathered whole on every rank, is the one process's after that step
    (SGD, and Adam, whose moments would let an early difference hide by the last step)."""
    config, launched, trace = run(model, ranks, optimizer)
    expected = single_process(config, trace, every_step=True)
    steps = [report["parameters_by_step"] for report in launched["ranks"]]
    assert all(len(kept) == len(trace.batches) == len(expected) for kept in steps)
    for step, want in enumerate(expected):
        for rank, kept in enumerate(steps):
            for name, value in kept[step].items():
                assert torch.allclose(torch.from_numpy(value), want[name], atol=TOLERANCE, rtol=0), (step, rank, name)
    assert not all(torch.equal(torch.from_numpy(steps[0][0][n]), torch.from_numpy(steps[0][1][n])) for n in steps[0][0])


@pytest.mark.parametrize("model, ranks", [("ffn", 2), ("transformer", 4)])
def test_each_rank_holds_torch_chunks_piece_of_every_cut_weight(model, ranks):
    _, launched, trace = run(model, ranks, "sgd")
    styles = {m["name"]: m["style"] for m in trace.facts["cut_modules"][0]}
    whole = launched["ranks"][0]["parameters"]
    for rank, report in enumerate(launched["ranks"]):
        elements = 0
        for name, shard in report["shards"].items():
            module, kind = name.rsplit(".", 1)
            full = torch.from_numpy(whole[name])
            style = styles.get(module)
            # A row-wise Linear's bias is added once to the summed output: whole on every rank.
            dim = CUT.get(style) if not (style == "rowwise" and kind == "bias") else None
            piece = full if dim is None else full.chunk(ranks, dim=min(dim, full.dim() - 1))[rank]
            assert shard.shape == tuple(piece.shape) and torch.equal(torch.from_numpy(shard), piece), (rank, name)
            elements += shard.size
        assert trace.facts["held"][rank]["parameters"]["elements"] == elements


@pytest.mark.parametrize("model, ranks", [("ffn", 2), ("transformer", 2), ("transformer", 4)])
def test_the_spans_are_the_all_reduces_commdebugmode_counted_with_the_activations_bytes(model, ranks):
    config, _, trace = run(model, ranks, "sgd")
    names = {m["index"]: m["name"] for m in trace.facts["cut_modules"][0]}
    last = trace.batches[-1].index
    for rank in range(ranks):
        timed = Counter((names[s.group], "backward" if s.phase == "allreduce_backward" else "forward")
                        for s in trace.spans_of(last) if s.lane == rank and s.phase.startswith("allreduce"))
        counted = trace.facts["comm_counts"][rank]
        leaves = {(module, passed): count for module, passed, op, count in counted
                  if op == "all_reduce" and not any(other.startswith(module + ".") for other, *_ in counted)}
        assert timed == Counter(leaves) and timed, rank
    # Megatron's g per row-wise Linear in forward; f per column-wise input that needs a gradient in backward: the data
    # into ffn's first Linear needs none, so ffn all-reduces in forward only.
    passes = Counter(p for _, p in {(g, p) for g, p in ((s.group, s.phase) for s in trace.spans_of(last) if s.lane == 0
                                                        and s.phase.startswith("allreduce"))})
    blocks = 3 if model == "transformer" else 1
    assert passes["allreduce_forward"] == 2 * blocks if model == "transformer" else passes["allreduce_forward"] == 1
    assert passes["allreduce_backward"] == (2 * blocks if model == "transformer" else 0)
    # Each all-reduce is handed the whole activation of the batch: rows x (steps x) features, float32.
    activation = 8 * (6 * 16 if model == "transformer" else config.output_size) * 4
    for rank, rows in enumerate(trace.facts["moved"]):
        for step, collective, calls, size in rows:
            assert size == calls * activation, (rank, step, collective)


def test_a_model_without_a_plan_or_heads_the_ranks_do_not_divide_are_one_sentence():
    with pytest.raises(ConfigError, match=r"model mlp has a BatchNorm1d .* so it has no tensor-parallel plan; model "
                                          r"ffn \(.*\) has one\.$"):
        RunConfig(engine="tp", model="mlp")
    with pytest.raises(ConfigError, match=r"model transformer's 8 attention heads do not divide over 3 ranks"):
        RunConfig(engine="tp", model="transformer", gpus=3)
    with pytest.raises(ConfigError, match=r"at least 2 ranks"):
        RunConfig(engine="tp", model="ffn", gpus=1)


@pytest.mark.parametrize("model, ranks", [("ffn", 2), ("transformer", 2), ("transformer", 4)])
def test_one_step_names_the_heads_each_rank_computes_as_the_run_cut_them(model, ranks):
    # tp-heads-split's lesson is in One step's title: on 4 ranks "2 of the 8 attention heads". The count is the
    # catalogue's; it must be what the ranks ran: each rank's shard of every wq holds that many heads' columns.
    from dpviz.catalogue import MODEL_SPECS
    from dpviz.engines.tp.read.one_step import one_step_tp
    from dpviz.engines.workload.models import Attention

    config, launched, trace = run(model, ranks, "sgd")
    title = unwrap(one_step_tp(trace, len(trace.batches) - 1).title)
    heads = MODEL_SPECS[model].tensor.heads
    whole, _ = tutorial.build(config)  # the model one process runs: its attention's head width
    widths = {m.head_width for m in whole.modules() if isinstance(m, Attention)}
    if not heads:
        assert not widths and "heads" not in title
        return
    (width,) = widths
    queries = [shard for report in launched["ranks"] for name, shard in report["shards"].items()
               if name.endswith("wq.weight")]
    assert queries and {shard.shape[0] // width for shard in queries} == {heads // ranks}  # torch's shard of the heads
    assert f"{heads // ranks} of the {heads} attention heads" in title, title


@pytest.mark.parametrize("model", ["ffn", "transformer"])
def test_the_timeline_opens_titled_with_megatrons_g_and_f_as_the_plan_makes_them(model):
    # tp-megatron-f-g's lesson was only in the notes, under the fold on a projector: the title counts each pass's
    # all-reduces on a rank. Megatron's g: one in forward after each row-wise Linear; its f: one in backward for each
    # group of column-wise Linears sharing an input that needs a gradient (the transformer's attention input and its
    # MLP's, per block; the ffn's one group reads the data, which needs none).
    from dpviz.engines.ddp.read.timeline import timeline_ddp_figure

    _, _, trace = run(model, 2, "sgd")
    modules = trace.facts["cut_modules"][0]
    g = sum(m["style"] == "rowwise" for m in modules)
    f = {"ffn": 0, "transformer": 2 * sum(m["style"] == "shared_input" for m in modules)}[model]
    title = unwrap(timeline_ddp_figure(trace, 0, len(trace.batches) - 1).layout.title.text)
    expected = f"{g} all-reduce{'s' if g != 1 else ''} in forward" + (f", {f} in backward" if f else "")
    assert g > 0 and f"opened on step {len(trace.batches)} of {len(trace.batches)}: {expected} on each rank" in title, title

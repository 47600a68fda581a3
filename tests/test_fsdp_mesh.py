"""FSDP × TP (the fsdp engine with a tensor-parallel degree) against torch, at 4 ranks on a 2 × 2 mesh.

Every rank must end a training run with the parameters (gathered with full_tensor()) of one process trained on the same
rows, with SGD and with Adam: FSDP averages the gradients over the dp_shard groups, each of which loads its own half of
a step's rows, so one process's mean loss over the whole batch is the reference. Each rank's local tensor must be the
piece DTensor's placements name (tp's Shard(d) cut by torch.chunk, then dp_shard's dim-0 chunk of that); every
all-gather and reduce-scatter must run in the rank's dp_shard group and every all-reduce in its tp group, as many of
each as torch's CommDebugMode counted. Bad settings are one sentence, on the command line too.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
import torch

from dpviz.catalogue import MODEL_SPECS
from dpviz.config import ConfigError, RunConfig
from dpviz.engines.fsdp.merge import to_trace
from dpviz.engines.ranks.launch import launch
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.page.link import settle
from dpviz.splitting import matches
from dpviz.trace import json_io as trace_json

from test_ddp_engine import TOLERANCE, single_process

RANKS, TP = 4, 2
DP = RANKS // TP
SETTINGS = {"ffn": dict(model="ffn"), "transformer": dict(model="transformer", input_size=11)}
RUNS = [("ffn", "sgd"), ("ffn", "adam"), ("transformer", "adam")]
STYLES = {"colwise": 0, "rowwise": 1}  # the dim of a Linear's weight each style cuts


@pytest.fixture(scope="module")
def runs():
    """One real run per case, shared by every test here (4 ranks on 2 cores take seconds each)."""
    made = {}
    for model, optimizer in RUNS:
        config = RunConfig(engine="fsdp", gpus=RANKS, tp=TP, train=True, optimizer=optimizer, batch_size=8,
                           data_size=24, **SETTINGS[model])
        launched = launch(config, keep_parameters=True)
        trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
        made[model, optimizer] = config, launched, trace
    return made


def tp_group(rank: int) -> list[int]:
    """init_device_mesh's row-major layout of (dp_shard, tp): a tp group is TP neighbouring ranks."""
    return [rank // TP * TP + j for j in range(TP)]


def dp_group(rank: int) -> list[int]:
    return [i * TP + rank % TP for i in range(DP)]


@pytest.mark.parametrize("case", RUNS)
def test_every_rank_ends_equal_to_one_process_on_the_same_rows(runs, case):
    config, launched, trace = runs[case]
    assert trace.failure is None and launched["exit_codes"] == [0] * RANKS and len(trace.batches) == 3
    assert all(batch.rows == 8 and len(set(batch.sample_ids)) == 8 for batch in trace.batches)  # each row once
    parameters = [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
                  for report in launched["ranks"]]
    expected = single_process(config, trace)
    assert parameters[0].keys() == expected.keys()
    for name, value in parameters[0].items():
        for other in parameters[1:]:
            assert torch.equal(other[name], value), f"{name} differs between ranks"
        assert value.shape == expected[name].shape, name  # whole, as full_tensor() gathers it
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    untrained = dict(tutorial.build(config)[0].named_parameters())
    assert all(not torch.allclose(value, untrained[name]) for name, value in parameters[0].items()
               if name.endswith("weight"))  # it trained
    assert trace_json.loads(trace_json.dumps(trace)).facts == trace.facts  # the engine's own check takes it


def test_a_tp_groups_ranks_load_the_same_rows_and_the_dp_shard_groups_split_them(runs):
    _, _, trace = runs["ffn", "sgd"]
    for batch in trace.batches:
        rows = {span.lane: trace.sample_ids(span) for span in trace.spans_of(batch.index, "forward")}
        for rank in range(RANKS):
            assert rows[rank] == rows[tp_group(rank)[0]] and len(rows[rank]) == 8 // DP
        assert sorted(rows[0] + rows[TP]) == sorted(batch.sample_ids)


def _piece(full: torch.Tensor, placements: list[str], rank: int) -> torch.Tensor:
    """What DTensor's placements (dp_shard's, tp's) leave rank `rank` of `full`: tp's Shard(d) a torch.chunk of dim d;
    then dp_shard's (Shard(0), or _StridedShard(0): the dp split made inside the tp split) a dim-0 chunk of that."""
    on_dp, on_tp = placements
    piece = full
    if on_tp.startswith("Shard("):
        dim = int(on_tp.split("dim=")[1].rstrip(")"))
        piece = piece.chunk(TP, dim=dim)[rank % TP]
    if "Shard(" in on_dp:
        assert "dim=0" in on_dp  # FSDP2 shards dim 0
        chunks = piece.chunk(DP, dim=0)
        i = rank // TP
        piece = chunks[i] if i < len(chunks) else piece[:0]  # a rank past the last row holds none
    return piece


@pytest.mark.parametrize("model", ["ffn", "transformer"])
def test_each_rank_holds_the_piece_its_dtensor_placements_name(runs, model):
    _, launched, trace = runs[model, "adam" if model == "transformer" else "sgd"]
    whole = {name: torch.from_numpy(value) for name, value in launched["ranks"][0]["parameters"].items()}
    plan = MODEL_SPECS[model].tensor.styles
    for rank, report in enumerate(launched["ranks"]):
        shares = {name: (placements, local, full) for name, placements, local, full in trace.facts["shares"][rank]}
        elements = 0
        for name, shard in report["shards"].items():
            placements, local, full = shares[name]
            if len(placements) == 1:  # what tensor parallelism leaves whole is a DTensor on the dp_shard mesh only
                placements = [*placements, "Replicate()"]
            assert list(whole[name].shape) == full and list(shard.shape) == local, (rank, name)
            module, kind = name.rsplit(".", 1)
            style = next((s for pattern, s in plan.items() if matches(pattern, module)), None)
            if style in STYLES and not (style == "rowwise" and kind == "bias"):  # a row-wise bias stays whole
                assert placements[1] == f"Shard(dim={min(STYLES[style], whole[name].dim() - 1)})", (name, placements)
            else:
                assert placements[1] == "Replicate()", (name, placements)
            piece = _piece(whole[name], placements, rank)
            assert torch.equal(torch.from_numpy(shard), piece), (rank, name, placements)
            elements += shard.size
        assert trace.facts["held"][rank]["parameters"]["elements"] == elements


@pytest.mark.parametrize("model", ["ffn", "transformer"])
def test_fsdp_collectives_run_in_the_dp_shard_group_and_tp_all_reduces_in_the_tp_group(runs, model):
    _, _, trace = runs[model, "adam" if model == "transformer" else "sgd"]
    last = trace.batches[-1].index
    for rank in range(RANKS):
        grouped = trace.facts["comm_groups"][rank]
        kinds = Counter()
        for op, group, count in grouped:
            if "gather" in op or "reduce_scatter" in op:
                assert group == dp_group(rank), (rank, op, group)
                kinds["fsdp"] += count
            else:
                assert op == "all_reduce" and group == tp_group(rank), (rank, op, group)
                kinds["tp"] += count
        assert kinds["fsdp"] and kinds["tp"], rank
        # CommDebugMode's own tally of the same step (its rows of module "": the whole step), counted apart.
        counted = Counter()
        for module, _, op, count in trace.facts["comm_counts"][rank]:
            if module == "":
                counted[op] += count
        assert counted == sum((Counter({op: count}) for op, _, count in grouped), Counter()), rank
        # The spans time the all-reduces of each sharded module and pass (a block's two cut Linears in one span, as
        # FSDP's phases of a module are one span each): one per (sharded module, pass) where CommDebugMode counted any.
        units = sorted(((m["name"], m["index"]) for m in trace.facts["modules"][rank]), key=lambda u: -len(u[0]))
        unit_of = lambda path: next(i for name, i in units if name == "" or path == name or path.startswith(name + "."))
        rows = trace.facts["comm_counts"][rank]
        leaves = {(unit_of(module), passed) for module, passed, op, _ in rows if op == "all_reduce" and module
                  and not any(other.startswith(module + ".") for other, _, o, _ in rows if o == "all_reduce")}
        timed = {(s.group, "backward" if s.phase == "allreduce_backward" else "forward")
                 for s in trace.spans_of(last) if s.lane == rank and s.phase.startswith("allreduce")}
        assert timed == leaves and len(timed) == len([s for s in trace.spans_of(last) if s.lane == rank
                                                      and s.phase.startswith("allreduce")]), rank


def test_the_trace_names_ranks_by_their_coordinates_and_each_collectives_bytes(runs):
    config, _, trace = runs["ffn", "sgd"]
    assert [lane.name.split(" (")[0] for lane in trace.lanes] == [
        f"rank {r}: dp_shard {r // TP}, tp {r % TP}" for r in range(RANKS)]
    for rank, rows in enumerate(trace.facts["moved"]):
        handed = {collective: (calls, size) for step, collective, calls, size in rows if step == 0}
        # Megatron's g: the row-wise Linear's output summed over the tp group: the rank's rows × output features.
        assert handed["all-reduce (forward)"] == (1, 8 // DP * config.output_size * 4), rank
        assert handed["all-gather (forward)"][1] > 0 and handed["reduce-scatter"][1] > 0
    kinds = {(m.kind, m.lane) for m in trace.spec.part("traffic")(trace)}
    assert {kind for kind, _ in kinds} == {"all-gather", "reduce-scatter", "all-reduce"}


def test_bad_degrees_and_models_are_one_sentence():
    with pytest.raises(ConfigError, match=r"^tp 3 does not divide the 4 ranks, .*\.$"):
        RunConfig(engine="fsdp", gpus=4, tp=3, model="ffn")
    with pytest.raises(ConfigError, match=r"^model mlp has a BatchNorm1d .* so it has no tensor-parallel plan; model "
                                          r"ffn \(.*\) has one\.$"):
        RunConfig(engine="fsdp", gpus=4, tp=2, model="mlp")
    with pytest.raises(ConfigError, match=r"^model transformer's 8 attention heads do not divide over 3 ranks per "
                                          r"tensor-parallel group"):
        RunConfig(engine="fsdp", gpus=6, tp=3, model="transformer")
    assert RunConfig(engine="fsdp", model="mlp").tp == 1  # FSDP alone, as before: any model
    fitted, said = settle({"engine": "fsdp", "tp": 2, "gpus": 4, "train": True})
    assert (fitted.model, fitted.tp, fitted.gpus) == ("ffn", 2, 4) and len(said) == 1 and "using model = 'ffn'" in said[0]


def test_the_command_line_refuses_a_degree_the_ranks_do_not_take_in_one_sentence():
    done = subprocess.run([sys.executable, "-m", "dpviz", "--engine", "fsdp", "--tp", "3", "--gpus", "4",
                           "--model", "ffn"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and "tp 3 does not divide the 4 ranks" in said[0], done.stderr


def _padded_bytes(whole: torch.Tensor, placements: list[str]) -> int:
    """What one all-gather of a parameter hands back on a rank: tensor parallelism's slice of it (torch.chunk over the
    dim its Shard names), dim 0 padded by FSDP2 to a multiple of the dp_shard ranks, in float32's 4 bytes."""
    piece = whole
    if len(placements) == 2 and placements[1].startswith("Shard("):
        piece = piece.chunk(TP, dim=int(placements[1].split("dim=")[1].rstrip(")")))[0]
    rows = -(-piece.shape[0] // DP) * DP
    return rows * (piece[0].numel() if piece.dim() > 1 else 1) * 4


@pytest.mark.parametrize("model", ["ffn", "transformer"])
def test_the_words_say_what_a_rank_holds_on_the_mesh_and_each_groups_collectives(runs, model):
    """The key figures, the explanation, One step and Memory say, with torch's figures: rank 0's elements of what
    tensor parallelism splits and of what it leaves whole (its DTensor local tensors), 1/4 and 1/2 of them, each
    collective's count (CommDebugMode's) in its group, and the bytes each all-gather hands back."""
    from dpviz.analysis.wording import human_bytes
    from dpviz.engines.fsdp.read import mesh_text
    from dpviz.engines.fsdp.read.one_step import one_step_fsdp

    config, launched, trace = runs[model, "adam" if model == "transformer" else "sgd"]
    whole = {name: torch.from_numpy(value) for name, value in launched["ranks"][0]["parameters"].items()}
    shards = launched["ranks"][0]["shards"]
    placements = {name: p for name, p, _, _ in trace.facts["shares"][0]}
    split = [name for name in whole if len(placements[name]) == 2 and placements[name][1].startswith("Shard(")]
    kept = [name for name in whole if name not in split]
    held_split, whole_split = sum(shards[n].size for n in split), sum(whole[n].numel() for n in split)
    held_kept, whole_kept = sum(shards[n].size for n in kept), sum(whole[n].numel() for n in kept)
    assert held_split * RANKS == whole_split and kept  # 1/W of what tensor parallelism cuts, exactly at these shapes
    rows = dict(trace.spec.part("summary_rows")(trace))
    explained = "\n".join(trace.spec.part("explain")(trace))
    said_split = f"{held_split:,} of their {whole_split:,} elements"
    said_kept = f"{held_kept:,} of their {whole_kept:,} elements"
    for text in (rows["held per rank"], explained):
        assert said_split in text and said_kept in text, text
        assert f"1/{RANKS} of each parameter tensor parallelism splits" in text or f"a rank holds 1/{RANKS}" in text
        assert f"1/{TP} by tensor parallelism" in text and f"then 1/{DP} of that slice by FSDP" in text
    assert f"{held_split + held_kept:,} of the model's {sum(w.numel() for w in whole.values()):,}" in explained
    assert "a shard of 1/" not in explained and "ran 4 ranks: 4 Python processes" in explained
    # CommDebugMode's tally of rank 0's step, pass by pass, in the words with the group each ran in
    counted = Counter({(passed, op): count for module, passed, op, count in trace.facts["comm_counts"][0] if module == ""})
    gathered = sum(_padded_bytes(whole[name], placements[name]) for name in whole)
    expected = [(counted["forward", "_allgather_base_"], "all-gather", "parameters in forward", gathered),
                (counted["backward", "_allgather_base_"], "all-gather", "parameters again in backward", gathered),
                (counted["backward", "_reduce_scatter_base_"], "reduce-scatter", "gradients in backward", gathered),
                (counted["forward", "all_reduce"], "all-reduce", "row-wise Linears' partial outputs in forward", None),
                (counted["backward", "all_reduce"], "all-reduce", "column-wise inputs' gradients in backward", None)]
    ran = {each.what.split(",")[0]: each for each in mesh_text.collectives(trace, step=0)}
    words = rows["collectives per rank per step"]
    assert f"across its dp_shard group (ranks {', '.join(map(str, dp_group(0)))})" in words
    assert f"inside its tp group (ranks {', '.join(map(str, tp_group(0)))})" in words
    for calls, kind, what, size in expected:
        if not calls:
            assert what not in ran and what not in words
            continue
        each = ran[what]
        assert each.calls == calls and each.kind == kind, (what, each)
        if size is not None:
            assert each.handed == size, (what, each.handed, size)
        if what.startswith("row-wise") and model == "ffn":  # Megatron's g: rank 0's rows × output features, float32
            assert each.handed == 8 // DP * config.output_size * 4
        said = f"{calls:,} {kind}{'s' if calls > 1 else ''} of {what}"
        assert f"{said} ({human_bytes(each.handed)} handed in)" in words or said in words, (said, words)
        assert said in explained
    figures = trace.spec.part("summary")(trace)
    assert figures["mesh"] == f"{DP} dp_shard × {TP} tp" and figures["rows per rank per step"] == f"{8 // DP} (global 8)"
    step = one_step_fsdp(trace, 0)
    assert step.cells[(0, "forward")].lines[0] == f"holds 1/{RANKS} cut, 1/{DP} rest"
    assert {a.name for a in step.arrows} == {"all-gather", "reduce-scatter", "all-reduce"}
    assert "tp groups (ranks 0, 1; ranks 2, 3)" in step.notes[-1]
    from dpviz.figures.memory import memory_figure

    caption = json.dumps(memory_figure(trace).to_plotly_json(), ensure_ascii=False)
    assert f"here {held_split:,} of {whole_split:,} elements on rank 0" in caption
    assert f"{held_kept:,} of {whole_kept:,}" in caption and "1/4 of every parameter" not in caption


@pytest.mark.parametrize("model", ["ffn", "transformer"])
def test_the_plan_at_real_size_is_what_every_rank_of_the_live_mesh_held(runs, model):
    """`dpviz plan --tp 2` at these small sizes against the live 2 × 2 run's own count of its tensors (facts["held"]):
    each rank's padded shard of its tensor-parallel slices, their gradients and Adam's two moments, byte for byte."""
    from dpviz.engines.plan import measure_catalogue
    from dpviz.engines.tp.plan import plan as tp_plan
    from plan_runs import held

    config, _, trace = runs[model, "adam"]
    shape = measure_catalogue(model, rows=config.batch_size, input_size=config.input_size,
                              output_size=config.output_size)
    planned = tp_plan(shape, RANKS, "adam", tp=TP)
    assert [device["mesh"] for device in planned] == [{"dp_shard": r // TP, "tp": r % TP} for r in range(RANKS)]
    for kind in ("parameters", "gradients", "optimizer state"):
        assert held(trace, kind) == [device[kind] for device in planned], kind

"""A model's plan, from its shapes, against torch: ZeroRedundancyOptimizer's own partition, and what the ranks of
live DDP, ZeRO-1 and FSDP runs held (facts["held"]) and DataParallel's devices held (its memory ledger), for
the catalogue's models and a user's uneven one under every engine; a pipeline's stages against live pipeline runs
(what each stage held, sent and kept in flight); the transformer at real sizes on the meta device; the command
line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.testing._internal.distributed.fake_pg import FakeStore

from dpviz.catalogue import MODEL_SPECS
from dpviz.config import RunConfig
from dpviz.engines import ENGINES, engine
from dpviz.engines.plan import plan, plan_shape, scaled
from dpviz.engines.workload.models import build_model, random_rows
from dpviz.engines.workload.shapes import measure
from dpviz.engines.zero1.plan import partition

from budget import limit
from plan_runs import UNEVEN, held, live, live_pipeline, uneven_model

ROOT = Path(__file__).resolve().parents[1]
# The transformer's real sizes as its declaration gives them (dpviz.catalogue.ModelSpec.sizes)
SIZES = {size: {"vocabulary": real.input_size, **real.options} for size, real in MODEL_SPECS["transformer"].sizes.items()}
MODELS = [name for name, spec in MODEL_SPECS.items() if spec.listed]
HELD = ("parameters", "gradients", "optimizer state")


def shape_of(name: str):
    model, _ = build_model(name, 5, 2)
    return measure(model, random_rows(name, 5, 8), catalogue=name)


def uneven_shape():
    return measure(*uneven_model())


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_zero1s_partition_is_zeroredundancyoptimizers_own(ranks):
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    try:
        for name in MODELS:
            model, _ = build_model(name, 5, 2)
            names = {id(p): n for n, p in model.named_parameters()}
            trainable = [p for p in model.parameters() if p.requires_grad]  # what a rank hands it (ranks/program.py)
            torch_partition = ZeroRedundancyOptimizer(trainable, optimizer_class=torch.optim.SGD,
                                                      lr=0.1)._partition_parameters()
            theirs = [[names[id(p)] for group in groups for p in group["params"]] for groups in torch_partition]
            ours = [[p.name for p in mine] for mine in partition(shape_of(name).params, ranks)]
            assert ours == theirs, name
    finally:
        dist.destroy_process_group()


# The grid: every engine that plans, on models whose shapes differ (a user's uneven one padded by FSDP2, one with
# a layer forward never uses, one a GRU), at 4 devices and the transformer at 2 too. The runs are shared
# (plan_runs): tests/test_held_storage.py holds the uneven ones against torch's own tensors.
GRID = [(name, 4) for name in ("mlp", "cnn", "transformer", "gru", "unused", UNEVEN)] + [("transformer", 2)]


@pytest.mark.parametrize("engine_name", ["dp", "ddp", "zero1", "fsdp"])
@pytest.mark.parametrize("name, gpus", GRID)
def test_the_plan_is_what_every_device_of_a_live_run_held(engine_name, name, gpus):
    trace = live(engine_name, name, gpus)
    assert trace is not None, f"{engine_name} refused {name}"
    planned = ENGINES[engine_name].part("plan")(uneven_shape() if name == UNEVEN else shape_of(name), gpus, "adam")
    for kind in HELD:
        assert held(trace, kind) == [device[kind] for device in planned], f"{kind} of {name} on {gpus}"
    assert planned[0]["activations"] > 0


# A pipeline: the transformer at 4 and 2 stages, each schedule and each optimizer once, the MLP and the CNN at 4,
# 4 microbatches of the plan's example batch. The run is the oracle for what each stage held, what it sent each
# step and how many microbatches' activations it kept at once.
PIPELINES = [("transformer", 4, "sgd", "gpipe"), ("transformer", 4, "adam", "1f1b"), ("transformer", 2, "sgd", "1f1b"),
             ("transformer", 2, "adam", "gpipe"), ("mlp", 4, "adam", "gpipe"), ("cnn", 4, "adam", "1f1b")]


@pytest.mark.parametrize("name, stages, optimizer, schedule", PIPELINES)
def test_a_pipelines_plan_is_what_every_stage_of_a_live_run_held_sent_and_kept(name, stages, optimizer, schedule):
    trace = live_pipeline(name, stages, optimizer, schedule, 4)
    planned = ENGINES["pipeline"].part("plan")(shape_of(name), stages, optimizer, schedule=schedule, microbatches=4)
    assert [d["layers"] for d in planned] == trace.facts["layers"]  # cut as the run cut it
    for kind in HELD:
        assert held(trace, kind) == [d[kind] for d in planned], kind
    assert any(d["optimizer state"] > 0 for d in planned)  # a stage of a ReLU alone steps nothing
    for stage, sends in enumerate(trace.facts["sent"]):  # every step's activations on, gradients back
        per_step = {}
        for step, _, _, size in sends:
            per_step[step] = per_step.get(step, 0) + size
        assert sorted(per_step) == [0, 1] and set(per_step.values()) == {planned[stage]["sent"]}, stage
    kept = [max(row[4] for row in rows) for rows in trace.facts["flight"]]
    assert [d["microbatches kept"] for d in planned] == kept
    assert kept == ([4] * stages if schedule == "gpipe" else [min(4, stages - s) for s in range(stages)])


@pytest.mark.parametrize("stages, micro", [(4, 4), (4, 8), (2, 8)])
def test_1f1b_keeps_min_m_and_s_minus_s_microbatches_where_gpipe_keeps_m(stages, micro):
    shape = scaled(shape_of("transformer"), 16)  # 16 rows: M of 4 or 8 microbatches
    gpipe, one = (ENGINES["pipeline"].part("plan")(shape, stages, "adam", schedule=schedule, microbatches=micro)
                  for schedule in ("gpipe", "1f1b"))
    for stage, (g, o) in enumerate(zip(gpipe, one)):
        assert g["activations"] > 0
        assert g["activations"] * min(micro, stages - stage) == o["activations"] * micro, stage
        assert {k: g[k] for k in HELD + ("sent",)} == {k: o[k] for k in HELD + ("sent",)}  # the schedule moves none


def test_a_model_a_pipeline_cannot_cut_is_refused_with_the_runs_own_sentence():
    for model, gpus, settings in (("mlp", 8, {}), ("gru", 2, {}), ("transformer", 1, {}),
                                  ("transformer", 4, {"schedule": "1f1b", "microbatches": 2}),
                                  ("transformer", 2, {"microbatches": 3})):
        with pytest.raises(ValueError) as refused:
            RunConfig(engine="pipeline", model=model, gpus=gpus, train=True, batch_size=8, data_size=8, **settings)
        found = plan(model, gpus=gpus, optimizer="adam", rows=8, **settings)
        assert found["engines"]["pipeline"] == {"label": "Pipeline", "refused": str(refused.value)}, model
        assert "devices" in found["engines"]["ddp"]  # the others plan all the same


def test_a_users_sequential_is_cut_and_planned_as_a_run_cuts_it_or_refused_in_its_sentence():
    from torch import nn

    from dpviz import record
    from dpviz.engines.workload.own import OwnModelError

    module, batch = uneven_model()  # Linear, ReLU, Linear: a stage each, the ReLU's with nothing to learn
    trace = record(module, batch, engine="pipeline", gpus=3, train=True, optimizer="adam", microbatches=4)
    assert trace.failure is None, trace.failure
    planned = plan(module, batch, gpus=3, optimizer="adam")["engines"]["pipeline"]["devices"]
    assert [d["layers"] for d in planned] == trace.facts["layers"] == [["0"], ["1"], ["2"]]
    for kind in HELD:
        assert held(trace, kind) == [d[kind] for d in planned], kind
    assert planned[1]["optimizer state"] == 0 and planned[1]["parameters"] == 0
    for stage, sends in enumerate(trace.facts["sent"]):  # every step's sends, each stage's sum
        steps = {row[0] for row in sends}
        assert steps and {sum(row[3] for row in sends if row[0] == step) for step in steps} == {planned[stage]["sent"]}
    for model, words in ((nn.Linear(5, 3), "not an nn.Sequential"), (nn.Sequential(nn.Linear(5, 3), nn.ReLU()), "has 2 layers")):
        with pytest.raises(OwnModelError, match=words) as refused:
            record(model, batch, engine="pipeline", gpus=3, train=True, microbatches=4)
        assert plan(model, batch, gpus=3)["engines"]["pipeline"]["refused"] == str(refused.value)


def test_a_tied_parameter_is_planned_once_and_in_one_fsdp_group():
    from torch import nn

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.out = nn.Embedding(40, 16), nn.Linear(16, 40, bias=False)
            self.out.weight = self.embed.weight

        def forward(self, tokens):
            return self.out(self.embed(tokens))

    shape = measure(Tied(), torch.randint(0, 40, (4, 6)))
    assert [p.name for p in shape.params] == ["embed.weight = out.weight"] and shape.units == ()
    assert plan_shape(shape, 2, "sgd")["engines"]["ddp"]["devices"][0]["parameters"] == 40 * 16 * 4


@pytest.mark.parametrize("size", list(SIZES))
def test_the_transformer_at_real_size_plans_on_the_meta_device(size):
    found = plan("transformer", size=size, gpus=8, optimizer="adam", rows=1)
    dims = SIZES[size]
    width, vocabulary = dims["width"], dims["vocabulary"]
    block = 12 * width * width + 10 * width  # wq, wk, wv (no bias), out, the MLP's two layers, two LayerNorms
    count = (vocabulary * width + dims["sequence"] * width + dims["blocks"] * block + 2 * width
             + width * vocabulary + vocabulary)
    assert found["model"]["parameters"] == count
    ddp, zero1, fsdp = (found["engines"][name]["devices"] for name in ("ddp", "zero1", "fsdp"))
    assert ddp[0]["parameters"] == 4 * count and ddp[0]["optimizer state"] == 8 * count
    assert sum(d["optimizer state"] for d in zero1) == 8 * count  # Adam's two moments, spread over the ranks
    largest = vocabulary * width  # the embedding: ZeroRedundancyOptimizer hands out whole parameters
    assert max(d["optimizer state"] for d in zero1) >= 8 * largest
    # FSDP2 pads the vocabulary's rows (the embedding's, the output layer's weight and bias) to a multiple of the 8
    # ranks, and every rank allocates its padded shard; Adam's moments follow the real rows.
    pad = -vocabulary % 8
    padded = count + pad * (2 * width + 1)
    assert [d["parameters"] for d in fsdp] == [d["gradients"] for d in fsdp] == [4 * padded // 8] * 8
    assert sum(d["optimizer state"] for d in fsdp) == 8 * count
    assert ddp[0]["activations"] > 0 and found["engines"]["dp"]["devices"][0]["parameters"] == 4 * count


def test_the_7b_transformer_plans_as_8_stages_on_the_meta_device():
    from dpviz.engines.pipeline.layers import split

    dims = SIZES["7b"]
    found = plan("transformer", size="7b", gpus=8, optimizer="adam", rows=8, schedule="1f1b", microbatches=8)
    stages = found["engines"]["pipeline"]["devices"]
    layers = ["embed + position", *(f"blocks.{i}" for i in range(dims["blocks"])), "norm + head"]
    assert [d["layers"] for d in stages] == [[layers[i] for i in cut] for cut in split(len(layers), 8)]
    # Every parameter on one stage, and its gradient and Adam's two moments with it.
    count = found["model"]["parameters"]
    assert sum(d["parameters"] for d in stages) == 4 * count
    assert all(2 * d["gradients"] == d["optimizer state"] == 2 * d["parameters"] for d in stages)
    block = 4 * (12 * dims["width"] ** 2 + 10 * dims["width"])
    assert stages[2]["parameters"] == 4 * block  # blocks 9 to 12 alone
    # A microbatch is one sequence of 1,024 tokens: its activations (width floats a token) on to the next stage, their
    # gradients back, for every one of the 8.
    boundary = 1024 * dims["width"] * 4
    assert [d["sent"] for d in stages] == [8 * boundary] + [16 * boundary] * 6 + [8 * boundary]
    assert [d["microbatches kept"] for d in stages] == [8, 7, 6, 5, 4, 3, 2, 1]
    per = [d["activations"] // d["microbatches kept"] for d in stages]
    assert per[2] == per[3] and per[1] > per[2]  # four blocks each; five on the second stage


def test_the_command_line_writes_the_plan_and_refuses_bad_values_in_one_line(tmp_path):
    out = tmp_path / "plan.json"
    done = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "4",
                           "--optimizer", "adam", "--json", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=limit(starts=1, then_s=30))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert set(document["engines"]) == {name for name, spec in ENGINES.items() if spec.has("plan")}
    for name, planned in document["engines"].items():
        assert len(planned["devices"]) == 4
        assert set(planned["devices"][0]) >= {"parameters", "gradients", "optimizer state", "activations", "sent"}
    assert "DistributedDataParallel" in done.stdout and "FSDP" in done.stdout and "Pipeline" in done.stdout
    assert document["engines"]["pipeline"]["options"] == {"schedule": "gpipe", "microbatches": 4}  # a run's defaults
    # The pipeline's settings as a run takes them; a model it cannot cut is its one line, the others planned still.
    done = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "4",
                           "--schedule", "1f1b", "--microbatches", "8", "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=limit(starts=1, then_s=30))
    assert done.returncode == 0 and "Pipeline: schedule 1f1b, microbatches 8" in done.stdout, done.stderr
    assert [d["microbatches kept"] for d in json.loads(out.read_text())["engines"]["pipeline"]["devices"]] == [4, 3, 2, 1]
    cut = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "mlp", "--gpus", "8"], cwd=ROOT,
                         capture_output=True, text=True, timeout=limit(starts=1, then_s=30))
    with pytest.raises(ValueError) as refused:
        RunConfig(engine="pipeline", model="mlp", gpus=8, train=True)
    # The other engines' plans stand: the command succeeds, the pipeline's row is the run's own sentence.
    rows = {line.split()[0]: line for line in cut.stdout.splitlines()[2:]}
    assert cut.returncode == 0 and cut.stderr == "", cut.stderr
    assert rows["Pipeline"].split(None, 1)[1] == f"not planned: {refused.value}" and "ZeRO-1" in rows
    for args, words in ((["--gpus", "0"], "gpus must be"), (["--optimizer", "lamb"], "optimizer must be"),
                        (["--size", "7b", "--model", "mlp"], "size is one of"),
                        (["--microbatches", "65"], "microbatches must be"), (["--schedule", "zb"], "--schedule")):
        bad = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "2", *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=limit(starts=1, then_s=30))
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


# Mixed precision: what the plan says each device holds is what the ranks of live mixed runs held (float32
# parameters or master shards, float32 gradients and Adam's state), for the MLP (FSDP keeps its batch norm float32)
# and the transformer at 2 and 4 devices.
@pytest.mark.parametrize("engine_name", ["dp", "ddp", "zero1", "fsdp"])
@pytest.mark.parametrize("name, gpus", [("mlp", 2), ("mlp", 4), ("transformer", 2), ("transformer", 4)])
def test_the_mixed_plan_is_what_every_device_of_a_live_mixed_run_held(engine_name, name, gpus):
    trace = live(engine_name, name, gpus, "mixed")
    model, _ = build_model(name, 5, 2)
    shape = measure(model, random_rows(name, 5, 8), precision="mixed")
    planned = ENGINES[engine_name].part("plan")(shape, gpus, "adam")
    for kind in HELD:
        assert held(trace, kind) == [device[kind] for device in planned], f"{kind} of {name} on {gpus}"
    assert held(trace, "parameters") == held(live(engine_name, name, gpus), "parameters")  # float32, as in full


# The transformer (LayerNorm, attention, GELU, linear layers). Not the MLP: CPU batch norm's kernel saves one more
# float32 tensor per channel for backward than its fake (meta) kernel says (64 bytes at its 16 channels).
@pytest.mark.parametrize("name", ["transformer"])
def test_what_the_mixed_plan_saves_for_backward_is_what_autocast_saves_on_the_cpu(name):
    """Measured on fake tensors, against a real forward under CPU autocast: the same storages autograd saves, each
    once (autocast's bfloat16 copies of the weights among them, parameters not), and as many of those copies."""
    model, _ = build_model(name, 5, 2)
    rows = random_rows(name, 5, 8)
    saved, copies = {}, {}

    def pack(tensor):
        base = tensor._base if tensor._base is not None else tensor
        if not isinstance(base, torch.nn.Parameter):
            saved[id(base)] = base.numel() * base.element_size()
            if base.dtype == torch.bfloat16 and any(base.data_ptr() != 0 and torch.equal(base, p.detach().to(base.dtype))
                                                    and base.shape == p.shape for p in model.parameters()):
                copies[id(base)] = saved[id(base)]
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(rows).float().mean()
        loss.backward()
    shape = measure(model, rows, precision="mixed")
    assert shape.saved_bytes == sum(saved.values()) and shape.weight_copies == sum(copies.values()) > 0
    assert shape.precision == "mixed" and {p.element_size for p in shape.params} == {4}
    assert {p.element_size for p in shape.policy.params} == {2}  # what FSDP2's policy gathers


def test_the_plan_gives_the_zero_papers_bytes_a_parameter_for_mixed_precision_adam():
    """Rajbhandari et al. (2020), Figure 1: Ψ = 7.5B parameters on N_d = 64 devices, mixed-precision Adam (K = 12):
    (2 + 2 + K)Ψ = 120 GB, (2 + 2)Ψ + KΨ/N_d = 31.4 GB, 2Ψ + (2 + K)Ψ/N_d = 16.6 GB, (2 + 2 + K)Ψ/N_d = 1.9 GB.
    The plan of the 7B transformer on 64 devices gives DDP the baseline's 16 bytes a parameter and FSDP the last
    stage's 16/64, exactly; ZeRO-1 (ZeroRedundancyOptimizer) 4 + 4 + 8/64 over its devices, not P_os's 4 + 12/64."""
    from fractions import Fraction

    from dpviz.analysis.model_state import paper, per_parameter

    psi, devices = 7_500_000_000, 64
    theirs = paper(devices)
    gb = {stage: float(bytes_each * psi) / 1e9 for stage, bytes_each in theirs.items()}
    assert [round(gb[s], 1) for s in ("baseline", "P_os", "P_os+g", "P_os+g+p")] == [120.0, 31.4, 16.6, 1.9]
    found = plan("transformer", size="7b", gpus=devices, optimizer="adam", rows=1, precision="mixed")
    ours = per_parameter(found)
    assert ours["ddp"] == theirs["baseline"] == 16
    assert ours["fsdp"] == theirs["P_os+g+p"] == Fraction(16, devices)
    assert ours["zero1"] == 4 + 4 + Fraction(8, devices) != theirs["P_os"]
    assert theirs["P_os"] == 2 + 2 + Fraction(12, devices)
    assert per_parameter(found, fullest=True)["ddp"] == 16  # every DDP device holds it all
    # Per device of DDP: float32 parameters and gradients, Adam's two float32 moments, whatever the compute.
    count = found["model"]["parameters"]
    first = found["engines"]["ddp"]["devices"][0]
    assert (first["parameters"], first["gradients"], first["optimizer state"]) == (4 * count, 4 * count, 8 * count)
    # What FSDP2 gathers and sends in bfloat16: the largest unit's parameters at 2 bytes, half of a full run's.
    full = plan("transformer", size="7b", gpus=devices, optimizer="adam", rows=1)
    assert found["engines"]["fsdp"]["devices"][0]["gathered"] * 2 == full["engines"]["fsdp"]["devices"][0]["gathered"]


def test_the_command_line_plans_mixed_precision_and_refuses_it_with_bfloat16_parameters(tmp_path):
    out = tmp_path / "plan.json"
    done = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "4",
                           "--optimizer", "adam", "--precision", "mixed", "--json", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=limit(starts=1, then_s=30))
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["model"]["precision"] == "mixed"
    assert "computing in bfloat16" in done.stdout and "ZeroRedundancyOptimizer" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "dpviz", "plan", "--model", "transformer", "--gpus", "2",
                          "--precision", "mixed", "--dtype", "bfloat16"], cwd=ROOT, capture_output=True, text=True,
                         timeout=limit(starts=1, then_s=30))
    assert bad.returncode == 2 and "precision mixed" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1

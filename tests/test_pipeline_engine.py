"""The pipeline engine, live: torch's PipelineStage under ScheduleGPipe or Schedule1F1B on real gloo processes, one
per stage, checked against PyTorch itself. The stages together train exactly what one process training the whole
model on the same microbatches trains; each stage runs its microbatches in the order torch's schedule runs them;
what crosses each stage boundary is the activation tensor there and its gradient; GPipe holds every microbatch's
activations at once and 1F1B at most as many as there are stages; every process ends, a failing run's too; bad
settings are refused in one sentence; and a trace survives its JSON file."""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import types

import numpy as np
import pytest
import torch
from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe
from torch.distributed.pipelining.schedules import _ComputationType

from dpviz.catalogue import SEQUENCE_LENGTH
from dpviz.config import ConfigError, RunConfig
from dpviz.engines import engine
from dpviz.engines.pipeline.merge import to_trace
from dpviz.engines.ranks.launch import launch
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.trace import json_io
from dpviz.trace.check import check
from dpviz.trace.values import TraceError
from tests.test_ddp_launch import alive, ranks_running

BASE = dict(engine="pipeline", train=True, inputs="tensor", data_size=64, batch_size=16)

# Each run covers stages (2, 4), schedule (gpipe, 1f1b), optimizer (sgd, adam) and model (the MLP, with a
# BatchNorm; the transformer, five layers) between them. Adam only on the transformer: the MLP's first Linear feeds a
# BatchNorm, which takes away whatever its bias adds, so that bias's true gradient is zero and the one computed is
# rounding, which Adam scales up to steps of its full learning rate whichever way the rounding went (the transformer's
# blocks leave their wq, wk and wv biases out for the same reason: dpviz.engines.workload.models.Block).
RUNS = {
    # 72 rows of 16: a short last batch of 8 each epoch, which the pipeline leaves out; two epochs.
    "mlp-2-gpipe-sgd": dict(model="mlp", gpus=2, schedule="gpipe", optimizer="sgd", microbatches=4, data_size=72,
                            epochs=2),
    "mlp-2-1f1b-sgd": dict(model="mlp", gpus=2, schedule="1f1b", optimizer="sgd", microbatches=4),
    # One layer a stage: the BatchNorm is a stage of its own, and the ReLU one with nothing to learn.
    "mlp-4-1f1b-sgd": dict(model="mlp", gpus=4, schedule="1f1b", optimizer="sgd", microbatches=4),
    "transformer-4-gpipe-adam": dict(model="transformer", gpus=4, schedule="gpipe", optimizer="adam", microbatches=8),
    "transformer-4-1f1b-sgd": dict(model="transformer", gpus=4, schedule="1f1b", optimizer="sgd", microbatches=8),
}


def config_of(name: str) -> RunConfig:
    return RunConfig(**{**BASE, **RUNS[name]})


@functools.cache
def run(name: str):
    """(config, what launch brought back with every stage's trained parameters, the trace merged from it): what
    engine("pipeline").record does, with the parameters kept."""
    config = config_of(name)
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    check(trace)  # every run's trace is one the page loads
    return config, launched, trace


def steps_of(config: RunConfig) -> int:
    return config.epochs * (config.data_size // config.batch_size)


# ---- the oracle: one process, the whole model, the same rows and microbatches

@functools.cache
def one_process(name: str) -> tuple[dict, dict]:
    """The parameters and buffers one process trains: every full batch of each epoch in the DataLoader's order (the
    short last one left out), cut into M equal microbatches, the gradient that of the mean of their losses (as
    torch's schedule scales each microbatch's by 1/M), then the optimizer's step."""
    config = config_of(name)
    model, loader = tutorial.build(config)
    teacher = tutorial.teacher_of(config)
    kind, settings = tutorial.optimizer_of(config)
    optimizer = kind(model.parameters(), **settings)
    for _ in range(config.epochs):
        batches = iter(loader)
        for _ in range(config.data_size // config.batch_size):
            rows, _ = next(batches)
            losses = []
            for micro in torch.tensor_split(rows, config.microbatches):
                with torch.no_grad():
                    target = teacher(micro)
                losses.append(tutorial.loss_of(config, model(micro), target))
            torch.stack(losses).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
    return ({k: v.detach().numpy().copy() for k, v in model.named_parameters()},
            {k: v.detach().numpy().copy() for k, v in model.named_buffers()})


def stage_values(launched: dict, kind: str) -> dict:
    """Every stage's `kind` ("parameters" or "buffers") by the whole model's names; no name held by two stages."""
    whole = {}
    for report in launched["ranks"]:
        assert not set(report[kind]) & set(whole), f"two stages hold {set(report[kind]) & set(whole)}"
        whole.update(report[kind])
    return whole


@pytest.mark.parametrize("name", list(RUNS))
def test_the_stages_train_what_one_process_trains(name):
    config, launched, trace = run(name)
    assert trace.failure is None and launched["exit_codes"] == [0] * config.gpus
    assert len(trace.batches) == steps_of(config) and all(b.rows == config.batch_size for b in trace.batches)
    want, _ = one_process(name)
    got = stage_values(launched, "parameters")
    assert set(got) == set(want)  # together the stages hold the whole model, each parameter once
    initial = {k: v.detach().numpy() for k, v in tutorial.build(config)[0].named_parameters()}
    assert any(not np.allclose(initial[k], want[k]) for k in want)  # it trained: the comparison means something
    for key in want:
        # The stages' gradient is each microbatch's backward on its own, summed and divided by M (torch's
        # scale_grads); one process differentiates the mean of the losses: the same sums in another order, so equal
        # to rounding, which a few steps of SGD or Adam carry no further than this.
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("name", ["mlp-2-gpipe-sgd", "mlp-4-1f1b-sgd"])
def test_batchnorm_statistics_match_one_process(name):
    # torch's PipelineStage, given no example shapes, runs each stage's layers once more in the first step to learn
    # them (the later stages on uninitialised memory); the observer runs that on copies of the buffers, so BatchNorm's
    # statistics are those of the microbatches alone, as one process's.
    config, launched, _ = run(name)
    _, want = one_process(name)
    got = stage_values(launched, "buffers")
    assert set(got) == set(want) and want
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5, err_msg=key)


def test_the_layers_are_cut_as_tensor_split_cuts_them():
    assert run("mlp-2-gpipe-sgd")[2].facts["layers"] == [["net.0", "net.1"], ["net.2", "net.3"]]
    assert run("mlp-4-1f1b-sgd")[2].facts["layers"] == [["net.0"], ["net.1"], ["net.2"], ["net.3"]]
    layers = ["embed + position", "blocks.0", "blocks.1", "blocks.2", "norm + head"]
    cut = [[layers[i] for i in part.tolist()] for part in torch.tensor_split(torch.arange(len(layers)), 4)]
    assert run("transformer-4-gpipe-adam")[2].facts["layers"] == cut == [layers[:2], *[[layer] for layer in layers[2:]]]


# ---- the order of each stage's microbatches: what torch's schedules execute

def executed(schedule: str, stages: int, stage: int, microbatches: int) -> list[tuple[str, int]]:
    """The forwards ("F") and backwards ("B") of one step on `stage`, in the order torch's own
    `_step_microbatches` runs them (torch/distributed/pipelining/schedules.py)."""
    if schedule == "gpipe":  # ScheduleGPipe: every forward, then every backward
        return [("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)]
    # Schedule1F1B: warm-up forwards (the last stage 1, the first `stages`), then one backward and one forward in
    # turn while forwards remain, then the backwards left (cool-down).
    order, forward, backward = [], 0, 0
    for _ in range(min(microbatches, stages - stage)):
        order.append(("F", forward))
        forward += 1
    while True:
        order.append(("B", backward))
        backward += 1
        if forward == microbatches:
            break
        order.append(("F", forward))
        forward += 1
    order += [("B", m) for m in range(backward, microbatches)]
    return order


def ir(schedule: str, stages: int, microbatches: int) -> dict[int, list[tuple[str, int]]]:
    """torch's own schedule IR (`_get_pipeline_order`), which needs nothing of the schedule but its counts: each
    stage's forwards and full backwards (its idle slots and its REDUCE_GRAD left out)."""
    cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule]
    order = cls._get_pipeline_order(types.SimpleNamespace(_num_stages=stages, _n_microbatches=microbatches))
    kinds = {_ComputationType.FORWARD: "F", _ComputationType.FULL_BACKWARD: "B"}
    return {stage: [(kinds[a.computation_type], a.microbatch_index) for a in actions
                    if a is not None and a.computation_type in kinds]
            for stage, actions in order.items()}


@pytest.mark.parametrize("schedule,stages,microbatches",
                         [("gpipe", 2, 4), ("gpipe", 4, 8), ("1f1b", 2, 4), ("1f1b", 4, 4), ("1f1b", 4, 8)])
def test_torchs_schedule_ir_agrees_with_what_it_executes(schedule, stages, microbatches):
    order = ir(schedule, stages, microbatches)
    assert sorted(order) == list(range(stages))
    for stage in range(stages):
        ran = executed(schedule, stages, stage, microbatches)
        assert sorted(ran) == sorted([("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)])
        if schedule == "1f1b" and stage == stages - 1:
            # torch 2.13's 1F1B IR numbers the last stage's forwards from 1 (its counter starts at 0 and is
            # incremented before the first steady-state forward when there is no warm-up forward): F1..F(M), B0..
            # Its forwards and backwards alternate as executed, its backwards are numbered as executed, and its
            # forwards are executed's, or (as in torch 2.13) each one more. The execution is what is recorded.
            assert [kind for kind, _ in order[stage]] == [kind for kind, _ in ran]
            assert [m for kind, m in order[stage] if kind == "B"] == [m for kind, m in ran if kind == "B"]
            forwards, ran_forwards = [m for kind, m in order[stage] if kind == "F"], [m for kind, m in ran if kind == "F"]
            assert forwards in (ran_forwards, [m + 1 for m in ran_forwards])
        else:
            assert order[stage] == ran, f"stage {stage}"


@pytest.mark.parametrize("name", list(RUNS))
def test_each_stage_runs_its_microbatches_in_the_order_torchs_schedule_runs_them(name):
    config, _, trace = run(name)
    for step in range(steps_of(config)):
        for stage in range(config.gpus):
            spans = sorted((s for s in trace.spans if s.batch == step and s.lane == stage
                            and s.phase in ("forward", "backward")), key=lambda s: s.start)
            got = [(s.phase[0].upper(), s.microbatch) for s in spans]
            assert got == executed(config.schedule, config.gpus, stage, config.microbatches), (step, stage)
            rows = config.batch_size // config.microbatches
            assert all(s.rows == rows and s.row_offset == s.microbatch * rows for s in spans)
            for earlier, later in zip(spans, spans[1:]):
                assert earlier.end <= later.start  # one process: its computes never overlap
    if config.schedule == "1f1b":  # the textbook shape: the first stage's first backward after `stages` forwards
        first = sorted((s for s in trace.spans if s.batch == 0 and s.lane == 0 and s.phase in ("forward", "backward")),
                       key=lambda s: s.start)
        assert [s.phase for s in first].index("backward") == min(config.gpus, config.microbatches)


def test_each_microbatch_runs_forward_through_the_stages_in_turn_and_back():
    config, _, trace = run("transformer-4-1f1b-sgd")
    for step in (0, steps_of(config) - 1):
        for micro in range(config.microbatches):
            span = {(s.phase, s.lane): s for s in trace.spans if s.batch == step and s.microbatch == micro}
            for stage in range(1, config.gpus):  # a stage forwards what the one before sent, after it was sent
                assert span["forward", stage - 1].end <= span["forward", stage].start
                assert span["backward", stage].end <= span["backward", stage - 1].start
            assert span["forward", config.gpus - 1].end <= span["loss", config.gpus - 1].start
            assert span["loss", config.gpus - 1].end <= span["backward", config.gpus - 1].start


# ---- what crosses each stage boundary

def boundary(config: RunConfig, after: int) -> torch.Tensor:
    """The activations the whole model has after its first `after` layers on one microbatch, computed here from the
    model's own modules (not the engine's stages)."""
    model, loader = tutorial.build(config)
    rows, _ = next(iter(loader))
    x = rows[: config.batch_size // config.microbatches]
    with torch.no_grad():
        if config.model == "mlp":
            return model.net[:after](x)
        assert config.model == "transformer" and 1 <= after <= 4
        x = model.embed(x) + model.position(torch.arange(x.shape[1]))
        for block in model.blocks[: after - 1]:
            x = block(x)
        return x


@pytest.mark.parametrize("name", list(RUNS))
def test_each_stage_sends_the_activations_at_its_boundary_and_their_gradients_back(name):
    config, _, trace = run(name)
    layers = [len(stage) for stage in trace.facts["layers"]]
    micro, stages, steps = config.microbatches, config.gpus, steps_of(config)
    sizes = []  # bytes of the activations at the boundary after each stage but the last
    for stage in range(stages - 1):
        activations = boundary(config, sum(layers[: stage + 1]))
        assert activations.dtype == torch.float32 and activations.shape[0] == config.batch_size // micro
        if config.model == "transformer":
            assert list(activations.shape[1:]) == [SEQUENCE_LENGTH, 16]
        sizes.append(activations.numel() * activations.element_size())
    if name.startswith("mlp-2"):
        assert sizes == [4 * 16 * 4]  # after net.1: (16 / 4 rows, 16 features) of float32
    for stage, sent in enumerate(trace.facts["sent"]):
        want = []
        for step in range(steps):
            if stage < stages - 1:  # every microbatch's activations to the next stage, once each
                want.append([step, "send_activations", micro, micro * sizes[stage]])
            if stage > 0:  # the gradient of every microbatch's input back to the stage before, the same size
                want.append([step, "send_gradients", micro, micro * sizes[stage - 1]])
        assert sorted(sent) == sorted(want), f"stage {stage}"
    # One send span per microbatch and direction, each of its microbatch, on the stages that send.
    for phase, senders in (("send_activations", range(stages - 1)), ("send_gradients", range(1, stages))):
        for step in range(steps):
            spans = [s for s in trace.spans if s.phase == phase and s.batch == step]
            assert sorted((s.lane, s.microbatch) for s in spans) == [(st, m) for st in senders for m in range(micro)]


# ---- activations in flight: GPipe holds them all, 1F1B at most as many as there are stages

def flight(trace, stage: int, step: int) -> list[list]:
    return [row for row in trace.facts["flight"][stage] if row[0] == step]


@pytest.mark.parametrize("gpipe,one_f_one_b", [("mlp-2-gpipe-sgd", "mlp-2-1f1b-sgd"),
                                               ("transformer-4-gpipe-adam", "transformer-4-1f1b-sgd")])
def test_gpipe_holds_every_microbatch_and_1f1b_at_most_the_stages(gpipe, one_f_one_b):
    configs = {name: run(name)[0] for name in (gpipe, one_f_one_b)}
    stages, micro = configs[gpipe].gpus, configs[gpipe].microbatches
    assert configs[one_f_one_b].gpus == stages and configs[one_f_one_b].microbatches == micro > stages
    peaks = {}
    for name in (gpipe, one_f_one_b):
        config, _, trace = run(name)
        last = steps_of(config) - 1
        for stage in range(stages):
            rows = flight(trace, stage, last)
            assert [(phase[0].upper(), m) for _, phase, m, _, _ in rows] == executed(config.schedule, stages, stage, micro)
            held = [count for *_, count in rows]
            assert held[-1] == 0  # every microbatch's activations freed by its backward
            most = max(held)
            assert most == (micro if config.schedule == "gpipe" else min(micro, stages - stage)), (name, stage)
            # The bytes held grow with the microbatches held: each holds the same activations.
            unit = rows[0][3]
            assert unit > 0 and all(size == count * unit for _, _, _, size, count in rows), (name, stage, rows)
            peaks[name, stage] = max(size for _, _, _, size, _ in rows)
    for stage in range(stages):
        assert peaks[gpipe, stage] * min(micro, stages - stage) == peaks[one_f_one_b, stage] * micro
    assert peaks[one_f_one_b, 0] < peaks[gpipe, 0]  # 1F1B's point: the first stage holds fewer


def test_the_first_steps_activations_are_those_of_its_microbatches_in_flight():
    # torch's shape inference in the first step is no microbatch: the ledger does not count its outputs.
    _, _, trace = run("mlp-2-gpipe-sgd")
    for stage in range(2):
        rows = flight(trace, stage, 0)
        unit = rows[0][3] // rows[0][4]
        assert rows and all(size == count * unit for _, _, _, size, count in rows), (stage, rows)


# ---- every process ends

def test_every_rank_process_ends_after_a_run():
    for name in ("mlp-2-gpipe-sgd", "transformer-4-1f1b-sgd"):
        _, launched, _ = run(name)
        assert launched["exit_codes"] == [0] * len(launched["pids"])
        assert not any(alive(pid) for pid in launched["pids"])
    assert ranks_running() == []


def test_a_stage_that_raises_is_named_and_every_process_ends():
    config = RunConfig(**{**BASE, "model": "mlp", "gpus": 3, "schedule": "gpipe", "optimizer": "sgd",
                          "microbatches": 4, "data_size": 96})  # 6 steps; stage 1 is the ReLU, between the others
    launched = launch(config, fault=(1, 2, "raise"), timeout_s=20)
    assert not any(alive(pid) for pid in launched["pids"]) and ranks_running() == []
    assert launched["ranks"][1]["failure"]["message"] == "rank 1 was told to fail in step 2"
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    check(trace)  # a failing run's trace is a valid trace too
    assert trace.failure.replica == 1 and trace.failure.batch == 2
    assert "rank 1 was told to fail in step 2" in trace.failure.message
    assert len(trace.batches) == 3 and all(b.rows == config.batch_size for b in trace.batches)
    assert max(s.batch for s in trace.spans) == 2  # the trace ends at the failing step
    for step in (0, 1):  # the steps before it ran whole, on every stage
        assert {(s.lane, s.microbatch) for s in trace.spans if s.batch == step and s.phase == "backward"} == \
            {(stage, m) for stage in range(3) for m in range(4)}
    assert not [s for s in trace.spans if s.batch == 2 and s.lane == 1 and s.phase in ("forward", "backward")]


# ---- bad settings, refused in one sentence

GOOD = dict(**BASE, model="mlp", gpus=2, schedule="gpipe", microbatches=4, optimizer="sgd")


@pytest.mark.parametrize("changes,words", [
    (dict(model="linear"), ["linear", "single layer", "stages"]),
    (dict(gpus=6), ["4 layers", "6 stages"]),
    (dict(gpus=4, schedule="1f1b", microbatches=2), ["1f1b", "at least 4 microbatches", "got 2"]),
    (dict(batch_size=18), ["batch_size 18", "4 equal microbatches"]),
    (dict(train=False), ["train"]),
    (dict(gpus=1), ["at least 2 stages"]),
    (dict(inputs="tuple"), ["inputs tensor"]),
])
def test_bad_settings_are_refused_in_one_sentence(changes, words):
    RunConfig(**GOOD)  # the settings changed are each the problem
    with pytest.raises(ConfigError) as raised:
        RunConfig(**{**GOOD, **changes})
    message = str(raised.value)
    assert message.endswith(".") and "\n" not in message and not re.search(r"[.;:!?]\s+[A-Z]", message), message
    for word in words:
        assert word in message, message


# ---- the trace's file

def rounded(trace):
    """The trace with its times at the 0.1 us its file keeps."""
    return dataclasses.replace(trace, spans=[dataclasses.replace(s, start=round(s.start, 7), end=round(s.end, 7))
                                             for s in trace.spans])


def test_a_pipeline_trace_survives_its_json_file():
    config, _, trace = run("transformer-4-1f1b-sgd")
    text = json_io.dumps(trace)
    loaded = json_io.loads(text)
    assert loaded.spans == rounded(trace).spans and loaded == rounded(trace)
    assert json.loads(json_io.dumps(loaded)) == json.loads(text)  # the same file again (but for its facts' order)
    forwards = [s for s in loaded.spans if s.phase == "forward" and s.batch == 0]
    assert sorted((s.lane, s.microbatch) for s in forwards) == [(st, m) for st in range(4) for m in range(8)]
    assert loaded.facts["sent"] == trace.facts["sent"] and loaded.facts["flight"] == trace.facts["flight"]
    # A pipeline file whose spans lost their microbatch is refused in a sentence, not a crash.
    data = json.loads(text)
    data["span_fields"].remove("microbatch")
    for row in data["spans"]:
        row.pop()
    with pytest.raises(TraceError, match="microbatch"):
        json_io.loads(json.dumps(data))


def test_a_pipeline_trace_saved_again_is_the_same_file():
    _, _, trace = run("mlp-2-1f1b-sgd")
    text = json_io.dumps(trace)
    assert json_io.dumps(json_io.loads(text)) == text


def test_a_file_written_before_spans_had_a_microbatch_still_loads():
    trace = engine("ddp").record(RunConfig(engine="ddp", gpus=2, train=True, data_size=16, batch_size=4))
    data = json.loads(json_io.dumps(trace))
    assert data["span_fields"][-1] == "microbatch" and len(data["span_fields"]) == 14
    data["span_fields"].pop()
    # such a file named the group by DDP's word for it, as every file before spans had a neutral group
    data["span_fields"][data["span_fields"].index("group")] = "bucket"
    for row in data["spans"]:
        assert row.pop() is None  # a DDP span names no microbatch
    assert len(data["span_fields"]) == 13 and all(len(row) == 13 for row in data["spans"])
    loaded = json_io.loads(json.dumps(data))
    assert loaded.spans == rounded(trace).spans and all(s.microbatch is None for s in loaded.spans)


@pytest.mark.parametrize("name", list(RUNS))
def test_the_views_order_of_a_schedule_not_run_is_the_order_it_runs(name):
    # The GPipe and 1F1B view draws the schedule a run did not use in bubble.schedule_order's order: held here to
    # what torch ran for that schedule, stage by stage, and laid out as the measured order is.
    from dpviz.engines.pipeline.read.bubble import lay_out, order, schedule_order, slot_share, slots, textbook_share

    config, _, trace = run(name)
    for step in range(steps_of(config)):
        for stage in range(config.gpus):
            assert order(trace, step, stage) == schedule_order(config.schedule, config.gpus, config.microbatches, stage)
    drawn = slots(trace, 1)
    assert drawn == lay_out([schedule_order(config.schedule, config.gpus, config.microbatches, s)
                             for s in range(config.gpus)])
    # Laid out one slot a pass, both schedules leave the textbook's share idle.
    assert slot_share(drawn) == pytest.approx(textbook_share(config.gpus, config.microbatches))


def test_the_chrome_trace_names_each_pass_and_transfer_by_its_microbatch():
    from dpviz.exports.chrome_trace import to_chrome_trace

    _, _, trace = run("mlp-2-1f1b-sgd")
    events = [e for e in to_chrome_trace(trace)["traceEvents"] if e.get("ph") == "X"]
    named = sorted((e["pid"], e["args"]["step"], e["cat"], e["args"]["microbatch"]) for e in events
                   if "microbatch" in e["args"])
    assert named == sorted((s.lane, s.batch, s.phase, s.microbatch) for s in trace.spans if s.microbatch is not None)
    assert all(e["name"].endswith(f"microbatch {e['args']['microbatch']}") for e in events if "microbatch" in e["args"])


# ---- a run that failed, read by every view

@functools.cache
def failed_run(step: int):
    """Stage 2 of 3 raises in `step` (0: before any microbatch of the run ended)."""
    config = RunConfig(**{**BASE, "model": "mlp", "gpus": 3, "schedule": "1f1b", "optimizer": "sgd",
                          "microbatches": 4, "data_size": 96})
    launched = launch(config, fault=(1, step, "raise"), timeout_s=20)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    check(trace)
    return trace


@pytest.mark.parametrize("step", [0, 1, 2])
def test_every_view_and_the_report_draw_a_run_that_failed_and_claim_no_bubble_for_its_failed_step(step):
    from dpviz.engines.pipeline.read.bubble import slots
    from dpviz.figures.report import html_report
    from dpviz.figures.text_fit import unwrap
    from dpviz.figures.views import BATCH, TEXT, views_of

    trace = failed_run(step)
    assert trace.failure.batch == step and slots(trace, step) is None  # the failed step is no whole step
    for view in views_of(trace):
        if not view.draws(trace) or view.control == TEXT:
            continue
        for batch in (range(len(trace.batches)) if view.control == BATCH else [None]):
            fig = view.build(trace) if batch is None else view.build(trace, batch)
            title = unwrap(fig.layout.title.text or "")
            if batch == step and view.key in ("grid", "step"):
                assert title.startswith(f"Step {step + 1} did not end: stage 2 failed") and "bubble" not in title
    schedules = views_of(trace)[[v.key for v in views_of(trace)].index("schedules")].build(trace)
    ran = [a.text for a in schedules.layout.annotations if " ran: " in (a.text or "")]
    assert bool(ran) == (step >= 1)  # the run's own order is drawn only from a step that ended (the opening one)
    assert "Step" in html_report(trace)


def test_a_trace_that_loses_a_stage_or_runs_a_backward_first_is_refused():
    trace = failed_run(2)
    short = dataclasses.replace(trace, facts={**trace.facts, "held": trace.facts["held"][:1]})
    with pytest.raises(TraceError, match="facts held name 1 stages, but the run has 3"):
        check(short)
    spans = list(trace.spans)
    first_b = next(i for i, s in enumerate(spans) if s.phase == "backward" and s.batch == 0)
    forward = next(s for s in spans if s.phase == "forward" and s.batch == 0 and s.lane == spans[first_b].lane
                   and s.microbatch == spans[first_b].microbatch)
    spans[first_b] = dataclasses.replace(spans[first_b], start=forward.start - 1e-4, end=forward.start - 5e-5)
    with pytest.raises(TraceError, match="backward in step 1 before its forward"):
        check(dataclasses.replace(trace, spans=spans))


def test_links_of_any_stages_microbatches_and_batch_are_fitted_to_a_pipeline():
    import itertools

    from dpviz.page.link import settle

    for model, gpus, schedule, micro, batch in itertools.product(
            ["linear", "mlp", "cnn", "transformer"], [1, 2, 4, 8], ["gpipe", "1f1b"], [1, 4, 16, 64], [1, 2, 3, 7, 30]):
        values = {**RunConfig().to_dict(), "engine": "pipeline", "model": model, "gpus": gpus, "schedule": schedule,
                  "microbatches": micro, "batch_size": batch}
        config, warnings = settle(values)
        assert config.engine == "pipeline", (values, warnings)  # never the defaults of another engine
        assert config.batch_size % config.microbatches == 0


@pytest.mark.parametrize("pair", [("pipeline", "ddp"), ("ddp", "pipeline")])
def test_a_comparison_that_fits_the_microbatches_to_the_batch_says_so_whichever_side_the_pipeline_is(pair):
    from dpviz.page.link import fit_pair

    asked = {**RunConfig().to_dict(), "train": True, "model": "mlp", "microbatches": 8}  # 30 rows: 8 does not divide
    configs, said = fit_pair(asked, pair)
    pipeline = configs[pair.index("pipeline")]
    assert pipeline.microbatches == 6 and 30 % 6 == 0
    assert said is not None and "microbatches = 6 (not 8)" in said

"""The ddp engine against torch: real DistributedDataParallel on real gloo processes.

Every rank must end with the same parameters, equal to one process training on each step's global
batch (the ranks' rows together) with the mean loss; each rank must load what torch's own
DistributedSampler gives it; the recorded buckets must be what DDP's reducer reports.
"""
from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DistributedSampler

from dpviz.trace import json_io as trace_json
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.catalogue import MODEL_SPECS
from dpviz.config import MODELS, RNN_MODELS, ConfigError, RunConfig
from dpviz.engines import engine
from dpviz.engines.ranks.launch import launch
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.ddp.sampler_rows import per_rank_batch

TOLERANCE = 1e-6  # float32 sums in another order (ddp-facts.md §6.3 measured 1.5e-8 after an epoch)


@functools.cache
def run(**settings):
    """One real run: the launcher's reports (with each rank's final parameters) and its trace."""
    config = RunConfig(engine="ddp", **settings)
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    return config, launched, trace


def single_process(config: RunConfig, trace, every_step: bool = False):
    """The same model trained in one process on each step's global batch, with the same loss and optimizer: its
    parameters at the end, or (`every_step`) a copy of them after each step."""
    model, loader = tutorial.build(config)
    data = loader.dataset.data
    teacher, optimizer = tutorial.training_parts(config, model)
    last = len(trace.batches) - 1
    after = []
    for batch in trace.batches:
        args, kwargs = tutorial.call(config, data[batch.sample_ids], batch.sample_ids)
        output = model(*args, **kwargs)
        with torch.no_grad():
            target = teacher(args[0])
        (F.mse_loss(output, target) / config.accumulate).backward()
        if (batch.index + 1) % config.accumulate == 0 or batch.index == last:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
        after.append({name: p.detach().clone() for name, p in model.named_parameters()})
    return after if every_step else dict(model.named_parameters())


@pytest.mark.parametrize("ranks, accumulate", [(2, 1), (4, 1), (3, 2)])
def test_every_rank_ends_equal_to_one_process_on_the_global_batch(ranks, accumulate):
    config, launched, trace = run(gpus=ranks, train=True, accumulate=accumulate, batch_size=20)
    assert trace.failure is None and launched["exit_codes"] == [0] * ranks
    parameters = [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
                  for report in launched["ranks"]]
    for name, value in parameters[0].items():
        for other in parameters[1:]:
            assert torch.equal(other[name], value), f"{name} differs between ranks"
    expected = single_process(config, trace)
    for name, value in parameters[0].items():
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    assert not torch.allclose(parameters[0]["fc.weight"], tutorial.build(config)[0].fc.weight.detach())  # it trained


@pytest.mark.parametrize("ranks, shuffle", [(2, True), (4, True), (3, False), (8, True)])
def test_each_rank_loads_what_distributed_sampler_gives_it(ranks, shuffle):
    config, _, trace = run(gpus=ranks, shuffle=shuffle, seed=3)
    for rank in range(ranks):
        loaded = [row for span in trace.spans if span.phase == "forward" and span.lane == rank
                  for row in trace.sample_ids(span)]
        sampler = DistributedSampler(range(config.data_size), num_replicas=ranks, rank=rank, shuffle=shuffle, seed=3)
        assert loaded == list(sampler)
    assert all(len(s.input_shape) and s.input_shape[0] == s.rows <= per_rank_batch(30, ranks)
               for s in trace.spans if s.phase == "forward")


def test_recorded_buckets_are_the_reducers():
    config, launched, trace = run(gpus=2, train=True, model="mlp", bucket_cap_mb=0.0002, batch_size=32)
    facts = trace.facts["ddp"]
    layouts, reducer = facts["buckets"], facts["reducer"]
    assert layouts[0]["step"] == 0 and len(layouts[0]["buckets"]) == 1  # one bucket before the first backward
    assert [b["bytes"] for b in layouts[0]["buckets"]] == reducer["bucket_sizes"]
    assert layouts[-1]["step"] == 1 and [b["bytes"] for b in layouts[-1]["buckets"]] == reducer["rebuilt_bucket_sizes"]
    assert len(reducer["rebuilt_bucket_sizes"]) > 1
    model = tutorial.build(config)[0]
    names = {name for name, _ in model.named_parameters()}
    for layout in layouts:  # every parameter in exactly one bucket, as many bytes as the model has
        params = [p for b in layout["buckets"] for p in b["params"]]
        assert sorted(params) == sorted(names)
        assert sum(b["bytes"] for b in layout["buckets"]) == sum(p.numel() * 4 for p in model.parameters())
    rebuilt = [s for s in trace.spans if s.phase == "rebuild"]
    assert {(s.batch, s.lane) for s in rebuilt} == {(1, 0), (1, 1)}  # at the start of step 1, on every rank


def test_each_bucket_is_all_reduced_on_every_rank_while_its_backward_runs():
    _, _, trace = run(gpus=2, train=True, model="mlp", bucket_cap_mb=0.0002, batch_size=32)
    layouts = trace.facts["ddp"]["buckets"]
    for batch in trace.batches:
        layout = [lay for lay in layouts if lay["step"] <= batch.index][-1]
        for rank in range(2):
            reduces = [s for s in trace.spans_of(batch.index, "allreduce") if s.lane == rank]
            backward = next(s for s in trace.spans_of(batch.index, "backward") if s.lane == rank)
            assert sorted(s.group for s in reduces) == [b["index"] for b in layout["buckets"]]
            assert all(backward.start <= s.start <= backward.end for s in reduces)  # launched from inside backward
            assert all(s.thread == "gloo" for s in reduces)


def test_accumulating_steps_do_not_all_reduce():
    config, _, trace = run(gpus=3, train=True, accumulate=2, batch_size=20)
    last = len(trace.batches) - 1
    for batch in trace.batches:
        syncs = (batch.index + 1) % 2 == 0 or batch.index == last
        assert bool(trace.spans_of(batch.index, "allreduce")) == syncs
        assert bool(trace.spans_of(batch.index, "step")) == syncs


def test_forward_only_runs_what_the_tutorial_runs():
    _, launched, trace = run(gpus=2, model="mlp")
    phases = {s.phase for s in trace.spans}
    assert phases == {"broadcast", "load", "buffers", "forward"}  # BatchNorm's buffers, broadcast every forward
    assert all(len(trace.spans_of(b.index, "buffers")) == 2 for b in trace.batches)
    assert launched["exit_codes"] == [0, 0]


def test_a_trace_round_trips_through_json_and_names_its_engine():
    _, _, trace = run(gpus=2, train=True, model="mlp", bucket_cap_mb=0.0002, batch_size=32)
    loaded = trace_json.loads(trace_json.dumps(trace))
    rounded = [dataclasses.replace(s, start=round(s.start, 7), end=round(s.end, 7)) for s in trace.spans]
    assert loaded.spans == rounded  # times keep 0.1 us in a file
    assert dataclasses.replace(loaded, spans=[]) == dataclasses.replace(trace, spans=[])
    assert trace_json.to_dict(trace)["engine"] == "ddp"
    assert [lane.name for lane in trace.lanes] == ["rank 0 (process on the CPU)", "rank 1 (process on the CPU)"]


def test_the_engine_records_through_the_seam_without_touching_process_state():
    threads = torch.get_num_threads()
    trace = engine("ddp").record(RunConfig(engine="ddp", gpus=2, data_size=8, batch_size=4))
    assert torch.get_num_threads() == threads  # ranks set their own threads, in their own processes
    assert trace.engine == "ddp" and trace.backend == "cpu" and len(trace.batches) == 2


@pytest.mark.parametrize("settings, words", [
    (dict(engine="ddp", inputs="kwargs"), "DataParallel pitfall"),
    (dict(engine="ddp", inputs="list"), "DataParallel pitfall"),
    (dict(engine="dp", bucket_cap_mb=1.0), "needs engine ddp"),
    (dict(engine="dp", accumulate=2, train=True), "needs engine ddp"),
    (dict(engine="ddp", accumulate=2), "needs train"),
    (dict(engine="ddp", bucket_cap_mb=0.0), "from 0.0001 to 1024"),
    (dict(engine="ddp", gpus=17), "gpus must be between 1 and 16"),
])
def test_what_ddp_cannot_run_is_one_sentence(settings, words):
    with pytest.raises(ConfigError, match=words) as error:
        RunConfig(**settings)
    assert str(error.value).count(". ") == 0 and str(error.value).endswith(".")


def test_cuda_without_gpus_is_refused_before_any_process_starts():
    with pytest.raises(ConfigError, match="one process per GPU"):
        engine("ddp").resolve(RunConfig(engine="ddp", gpus=2, backend="cuda"), available=0)
    assert engine("ddp").resolve(RunConfig(engine="ddp", gpus=2), available=0).backend == "cpu"
    assert engine("ddp").resolve(RunConfig(engine="ddp", gpus=2), available=2).backend == "cuda"


FORMS = [(model, inputs) for model in MODELS for inputs in ("tensor", "tuple", "dict", "hidden")
         if (inputs != "hidden" or model in RNN_MODELS) and inputs in (MODEL_SPECS[model].inputs or (inputs,))]


@pytest.mark.parametrize("model, inputs", FORMS)
def test_every_model_and_input_form_ddp_can_run_trains(model, inputs):
    config = RunConfig(engine="ddp", gpus=2, model=model, inputs=inputs, train=True, batch_size=32, data_size=64,
                       find_unused=model == "unused")  # without it, its pitfall (tests/test_ddp_pitfalls.py)
    trace = engine("ddp").record(config)
    assert trace.failure is None, trace.failure.headline
    assert trace.facts["ddp"]["exit_codes"] == [0, 0]
    forwards = [s for s in trace.spans if s.phase == "forward"]
    assert len(forwards) == 2 * len(trace.batches) and all(s.rows == 16 for s in forwards)
    assert all(s.input_shape[config.dim] == 16 for s in forwards)  # the rank's rows, on the model's batch dim


def test_a_model_with_a_frozen_teacher_inside_trains_and_its_trace_loads():
    """The catalogue's 'loss' model carries its teacher as frozen parameters: no rank steps them, and the
    trace's check counts only what trains."""
    from dpviz.config import RunConfig
    from dpviz.engines.run import record
    from dpviz.trace import json_io

    trace = record(RunConfig(engine="ddp", model="loss", gpus=2, train=True, data_size=8, batch_size=4))
    assert trace.failure is None
    held = trace.facts["held"]
    assert held[0]["owns"] == held[1]["owns"]
    assert sum(e for _, e in held[0]["owns"]) < held[0]["parameters"]["elements"]  # the teacher is not stepped
    json_io.loads(json_io.dumps(trace))

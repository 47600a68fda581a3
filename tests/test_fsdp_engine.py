"""The fsdp engine against torch: FSDP2's fully_shard on real gloo processes.

Every rank must end with the same whole parameters (gathered with full_tensor()), equal to one process training
on each step's global batch, with SGD and with Adam (FSDP changes where parameters, gradients and optimizer state
live, not what the step computes). Each rank's shard of a parameter must be its dim-0 chunk of the whole one
(torch.chunk, as FSDP2 shards), and what the trace says each rank held must be what its tensors hold: its shard
of the parameters and gradients, and its optimizer's state of that shard, 1/W of DDP's. Per step, every rank
times each sharded module's all-gather, forward, reshard, all-gather in backward and reduce-scatter.
"""
from __future__ import annotations

import functools
import json

import pytest
import torch
from torch.utils.data import DistributedSampler

from dpviz.cli import main
from dpviz.config import RunConfig
from dpviz.engines import ENGINES
from dpviz.engines.ranks.launch import launch
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.workload.units import shard_units
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.trace import json_io as trace_json
from dpviz.trace.values import TraceError

from test_ddp_engine import TOLERANCE, single_process

# The MLP at 64 features: Linear(64, 16), BatchNorm1d(16), Linear(16, 2): three sharded modules.
ADAM = dict(model="mlp", input_size=64, optimizer="adam", batch_size=20, data_size=40)
MODULE_PHASES = ("gather", "compute", "reshard", "gather_backward", "reduce_scatter")


@functools.cache
def run(engine="fsdp", **settings):
    """One real run of 2 ranks: the launcher's reports (with each rank's parameters and shards) and its trace."""
    config = RunConfig(engine=engine, gpus=2, train=True, **settings)
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    return config, launched, trace


def model_of(config: RunConfig) -> torch.nn.Module:
    return tutorial.build(config)[0]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_every_rank_ends_equal_to_one_process_on_the_global_batch(optimizer):
    config, launched, trace = run(batch_size=20, data_size=60, optimizer=optimizer)
    assert trace.failure is None and launched["exit_codes"] == [0, 0] and trace.engine == "fsdp"
    first, second = [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
                     for report in launched["ranks"]]
    for name, value in first.items():
        assert torch.equal(second[name], value), f"{name} differs between ranks"
    expected = single_process(config, trace)
    for name, value in first.items():
        assert value.shape == expected[name].shape, name  # whole, as full_tensor() gathers it
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    assert not torch.allclose(first["fc.weight"], model_of(config).fc.weight.detach())  # it trained


@pytest.mark.parametrize("settings", [ADAM, dict(batch_size=20, data_size=40)])
def test_each_rank_holds_its_dim0_chunk_of_every_parameter_and_the_state_of_that_chunk(settings):
    config, launched, trace = run(**settings)
    assert trace.failure is None
    names = [name for name, _ in model_of(config).named_parameters()]
    for rank, report in enumerate(launched["ranks"]):
        shards, whole = report["shards"], report["parameters"]
        assert list(shards) == names
        for name in names:  # FSDP2 shards dim 0 as torch.chunk does
            chunk = torch.chunk(torch.from_numpy(whole[name]), 2, dim=0)[rank]
            assert torch.equal(torch.from_numpy(shards[name]), chunk), name
        held = trace.facts["held"][rank]
        elements = sum(value.size for value in shards.values())
        assert held["parameters"] == held["gradients"] == {"elements": elements, "bytes": 4 * elements}
        assert held["owns"] == [[name, shards[name].size] for name in names]
        state = [value for kept in report["optimizer_state"] for value in kept.values() if value.ndim > 0]
        assert held["optimizer state"] == {"elements": sum(v.size for v in state), "bytes": sum(v.nbytes for v in state)}
        # SGD's momentum buffer, Adam's two moments: of the rank's shard, shaped as it
        assert sorted(v.shape for v in state) == sorted(s.shape for s in shards.values()
                                                         for _ in range(2 if config.optimizer == "adam" else 1))
    model = sum(p.numel() for p in model_of(config).parameters())
    assert sum(rank["parameters"]["elements"] for rank in trace.facts["held"]) == model


def test_with_adam_each_rank_holds_half_of_what_each_ddp_rank_holds():
    _, _, ddp = run("ddp", **ADAM)
    config, _, fsdp = run(**ADAM)
    model = sum(p.numel() for p in model_of(config).parameters())
    for theirs, mine in zip(ddp.facts["held"], fsdp.facts["held"]):
        assert theirs["parameters"]["elements"] == model and theirs["optimizer state"]["elements"] == 2 * model
        assert mine["parameters"]["elements"] == model // 2  # 1,106 even: a half each
        assert mine["optimizer state"]["elements"] == model  # Adam's two moments of half the model


def test_each_sharded_module_is_gathered_run_resharded_and_reduce_scattered_every_step():
    config, _, trace = run(**ADAM)
    modules = [name for name, unit in shard_units(model_of(config))]
    assert modules == ["net.0", "net.1", "net.3"]  # each module with parameters; the root holds none of its own
    for step in range(len(trace.batches)):
        for rank in range(2):
            spans = {(s.phase, s.group): s for s in trace.spans_of(step) if s.lane == rank and s.group is not None}
            assert set(spans) == {(phase, index) for phase in MODULE_PHASES for index in range(len(modules))}
            forward = next(s for s in trace.spans_of(step, "forward") if s.lane == rank)
            backward = next(s for s in trace.spans_of(step, "backward") if s.lane == rank)
            for index in range(len(modules)):
                gather, compute, reshard = (spans[(phase, index)] for phase in ("gather", "compute", "reshard"))
                assert forward.start <= gather.start <= gather.end <= compute.start <= compute.end <= reshard.start
                assert reshard.end <= forward.end
                again, reduce = spans[("gather_backward", index)], spans[("reduce_scatter", index)]
                assert backward.start <= again.start <= again.end <= reduce.start <= reduce.end <= backward.end
                assert "all-reduce" in reduce.thread  # gloo has no reduce-scatter: the span says what ran
            for earlier, later in zip(range(len(modules)), range(1, len(modules))):  # forward in order, backward reversed
                assert spans[("gather", earlier)].start < spans[("gather", later)].start
                assert spans[("reduce_scatter", later)].start < spans[("reduce_scatter", earlier)].start


def test_a_trace_round_trips_and_a_shard_fsdp_cannot_hold_is_refused():
    _, _, trace = run(**ADAM)
    text = trace_json.dumps(trace)
    assert trace_json.dumps(trace_json.loads(text)) == text
    document = json.loads(text)
    document["facts"]["held"][1]["owns"].pop()  # rank 1 no longer steps its shard of the last parameter
    with pytest.raises(TraceError, match="under FSDP every rank steps its shard of every parameter"):
        trace_json.loads(json.dumps(document))


def test_the_command_line_runs_fsdp_with_adam_and_refuses_ddps_own_options(tmp_path, capsys):
    assert main(["--engine", "fsdp", "--optimizer", "adam", "--train", "--gpus", "2", "--data-size", "20",
                 "--trace", str(tmp_path / "run.json")]) == 0
    trace = trace_json.loads((tmp_path / "run.json").read_text())
    assert (trace.engine, trace.config.optimizer, trace.spec.label) == ("fsdp", "adam", "FSDP")
    assert "Let's use 2 ranks!" in capsys.readouterr().out
    for flag in (["--bucket-cap-mb", "1"], ["--find-unused"], ["--accumulate", "2"], ["--join"]):
        with pytest.raises(SystemExit) as refused:
            main(["--engine", "fsdp", "--train", *flag])
        assert refused.value.code == 2 and "so it needs --engine ddp" in capsys.readouterr().err


def test_the_spec_offers_only_what_is_true_for_fsdp():
    spec = ENGINES["fsdp"]
    assert {o.name for o in spec.options}.isdisjoint({"bucket_cap_mb", "find_unused", "accumulate", "join"})
    assert "optimizer" in {o.name for o in spec.options}
    assert not spec.has("view.flow")  # DDP's flow draws its buckets' all-reduce, which FSDP has none of


def test_the_page_offers_fsdp_and_the_optimizer():
    from test_app import page

    app = page(engine="fsdp", gpus="2", train="true", optimizer="adam")
    assert not app.exception and app.header[0].value == "How FSDP shards the model across the ranks"
    assert app.radio(key="engine_choice").value == "fsdp" and app.radio(key="optimizer").value == "adam"
    assert app.get("plotly_chart") and app.query_params["engine"] == "fsdp"


def test_the_memory_view_catches_the_largest_module_gathered_whole():
    config, _, trace = run(**ADAM)
    units = shard_units(model_of(config))
    largest = max(sum(p.numel() * p.element_size() for p in unit.parameters()) for _, unit in units)
    for step in range(len(trace.batches)):
        for rank in range(2):
            held = {m.category: m.bytes for m in trace.memory if (m.batch, m.phase, m.lane) == (step, "gather", rank)}
            assert held["gathered parameters"] == largest  # Linear(64, 16): 1,040 elements, whole for its forward
            after = {m.category for m in trace.memory if (m.batch, m.phase, m.lane) == (step, "forward", rank)}
            assert "gathered parameters" not in after  # freed again once forward is done


def test_the_timeline_names_each_sharded_module_and_says_what_gloo_ran():
    from dpviz.engines.ddp.read.timeline import prepare_timeline_ddp, timeline_ddp_figure

    _, _, trace = run(**ADAM)
    table = prepare_timeline_ddp(trace, 0, len(trace.batches) - 1)
    reduces = table[table["phase"] == "reduce_scatter"]
    assert len(reduces) == 3 * 2 * len(trace.batches)
    assert all("gloo has no reduce-scatter: run as an all-reduce" in d for d in reduces["detail"])
    assert {d.split(", sharded module ")[1][:6] for d in reduces["detail"]} == {"1 of 3", "2 of 3", "3 of 3"}
    figure = timeline_ddp_figure(trace, 0, len(trace.batches) - 1)
    legend = {t.name for t in figure.data if t.showlegend is not False}
    assert {"all-gather (forward)", "reshard", "all-gather (backward)", "reduce-scatter", "module forward"} <= legend
    notes = figure.layout.title.subtitle.text.replace("<br>", " ")
    assert "each sharded module's collectives" in notes and "gradient bucket" not in notes
    assert "each reduce-scatter runs as an all-reduce" in notes  # said where it is drawn


def test_the_key_figures_explanation_and_log_speak_of_shards_not_buckets():
    from dpviz.analysis.explain import explain
    from dpviz.analysis.summary import key_figures, summary_table
    from dpviz.exports.tutorial_log import tutorial_log

    config, _, trace = run(**ADAM)
    model = sum(p.numel() for p in model_of(config).parameters())
    table = summary_table(trace)
    words = " ".join([*explain(trace), *table["key figure"], *table["value"], *key_figures(trace), tutorial_log(trace)])
    assert not [key for key in [*table["key figure"], *key_figures(trace)] if "bucket" in key or "all-reduce" in key]
    assert "DistributedDataParallel ran" not in words and "no all-reduce ran" not in words
    assert f"{model // 2:,} of {model:,} parameter elements on every rank (1/2)" in words
    assert "gloo has no reduce-scatter" in words
    assert tutorial_log(trace).count("gradients reduce-scattered per sharded module (3 modules)") == len(trace.batches)


def test_a_parameter_forward_never_uses_needs_no_find_unused_under_fsdp():
    """DDP's pitfall (a bucket that never fills) is none here: each module reduce-scatters its own gradients."""
    config, launched, trace = run(model="unused", batch_size=20, data_size=40)
    assert trace.failure is None and launched["exit_codes"] == [0, 0]
    trace_json.loads(trace_json.dumps(trace))  # its check takes a shard with no gradient
    for held in trace.facts["held"]:
        spare = sum(elements for name, elements in held["owns"] if name.startswith("spare."))
        assert spare and held["gradients"]["elements"] == held["parameters"]["elements"] - spare
    expected = single_process(config, trace)
    for name, value in launched["ranks"][0]["parameters"].items():
        assert torch.allclose(torch.from_numpy(value), expected[name].detach(), atol=TOLERANCE, rtol=0), name


def test_fsdps_phase_colours_show_on_both_pages():
    from dpviz.engines.fsdp.vocabulary import VOCABULARY
    from dpviz.figures.colors import DARK_BACKGROUND, LIGHT_BACKGROUND, contrast_ratio

    for phase in VOCABULARY.phases:
        if phase.color != "lane":
            assert contrast_ratio(phase.color, DARK_BACKGROUND) >= 3, phase.name
            assert contrast_ratio(phase.color, LIGHT_BACKGROUND) >= 3, phase.name


def test_the_page_says_what_ran_the_ranks():
    _, _, trace = run(**ADAM)
    said = trace.spec.part("devices")(trace, "this machine has 0 CUDA GPUs")
    assert "fully_shard (FSDP2) ran 2 ranks" in said and "DistributedDataParallel" not in said


def test_each_rank_loads_what_distributed_sampler_gives_it():
    config, _, trace = run(batch_size=20, data_size=60, optimizer="sgd")
    for rank in range(2):
        loaded = [row for span in trace.spans if span.phase == "forward" and span.lane == rank
                  for row in trace.sample_ids(span)]
        assert loaded == list(DistributedSampler(range(config.data_size), num_replicas=2, rank=rank, shuffle=True,
                                                 seed=config.seed))


def test_the_batch_size_is_said_as_what_every_fsdp_rank_does():
    """Each rank runs a DataLoader of its own: the words say so of FSDP's ranks, never DDP's DataLoader (nor an
    "FSDP's own DataLoader", which FSDP has none of)."""
    from dpviz.analysis.explain import explain
    from dpviz.exports.tutorial_log import tutorial_log

    config, _, trace = run(**ADAM)
    words = " ".join(explain(trace))
    each = -(-config.batch_size // 2)
    assert (f"under FSDP every rank runs a DataLoader of its own, whose batch_size is per process: each rank's "
            f"DataLoader was given ceil({config.batch_size}/2) = {each} rows") in words
    assert "DDP's own" not in words + tutorial_log(trace) and "FSDP's own DataLoader" not in words


@pytest.mark.parametrize("ranks", [2, 4])
def test_the_memory_caption_says_each_rank_holds_about_1_over_w_its_dim0_rows(ranks):
    """The shares are torch.chunk's on dim 0 of every parameter: even at 2 ranks ("each rank the same"), uneven at 4
    (Linear(16, 2) leaves ranks 2 and 3 none of its 2 rows); the lead never reads "X to X"."""
    from test_step_fsdp import chunk_elements, run as run_ranks
    from dpviz.analysis.batch_facts import memory_batches
    from dpviz.figures import memory_figure

    config, trace = run_ranks(ranks)
    mine = chunk_elements(config, [name for name, _ in model_of(config).named_parameters()], ranks)
    model = sum(mine)
    for batch in memory_batches(trace):
        (caption,) = [a.text.replace("<br />", " ").replace("<br>", " ") for a in memory_figure(trace, batch).layout.annotations]
        assert f"Each rank holds about 1/{ranks} of every parameter: its own rows of dim 0, ceil(rows/{ranks}) a rank" in caption
        assert "with the gradients and the optimizer state of its shard only" in caption
        if len(set(mine)) == 1:
            assert f"here {mine[0]:,} of the model's {model:,} parameter elements, each rank the same" in caption
        else:
            assert (f"here {min(mine):,} to {max(mine):,} of the model's {model:,} parameter elements "
                    f"(rank {mine.index(max(mine))} the most)") in caption
        lead = caption.split("</b>")[0]
        if " to " in lead:  # two amounts only where they read apart
            low, high = lead.split("hold ")[1].split(" (")[0].split(" to ")
            assert low != high
    assert ranks == 2 or len(set(mine)) > 1  # the 4-rank run is the uneven one

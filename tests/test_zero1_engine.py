"""The zero1 engine against torch: ZeroRedundancyOptimizer over real DistributedDataParallel on real gloo processes.

Every rank must end with the same parameters, equal to one process training on each step's global batch
with the whole optimizer (ZeRO-1 changes where the optimizer's state lives, not what the step computes),
with SGD and with Adam. What each rank holds is counted from its tensors and must be what torch's optimizer
on that rank holds; the parameters each rank steps must be ZeroRedundancyOptimizer's own partition. With Adam,
DDP keeps twice the parameters as state on every rank, ZeRO-1 twice the parameters over all ranks together, in
shards as uneven as its whole parameters make them. The command line and the page offer the engine and the
optimizer from the registry.
"""
from __future__ import annotations

import functools
import json
import warnings

import pytest
import torch
import torch.distributed as dist

with warnings.catch_warnings():  # torch.distributed.optim scripts its functional optimizers on import: a deprecation each
    warnings.simplefilter("ignore", DeprecationWarning)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.testing._internal.distributed.fake_pg import FakeStore

from dpviz.cli import main
from dpviz.config import RunConfig
from dpviz.trace import json_io as trace_json
from dpviz.trace.values import TraceError
from dpviz.engines.ranks.launch import launch
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.workload import tutorial_data as tutorial

from test_ddp_engine import TOLERANCE, single_process


# The MLP at 64 features: one 64 x 16 weight of 1,024 elements beside five small parameters (82 together).
ADAM = dict(model="mlp", input_size=64, optimizer="adam", batch_size=20, data_size=40)


@functools.cache
def run(engine="zero1", **settings):
    """One real run of 2 ranks: the launcher's reports (with each rank's final parameters) and its trace."""
    config = RunConfig(engine=engine, gpus=2, train=True, **settings)
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    return config, launched, trace


def final_parameters(launched) -> list[dict[str, torch.Tensor]]:
    return [{name: torch.from_numpy(value) for name, value in report["parameters"].items()}
            for report in launched["ranks"]]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_every_rank_ends_equal_to_one_process_on_the_global_batch(optimizer):
    config, launched, trace = run(batch_size=20, data_size=60, optimizer=optimizer)
    assert trace.failure is None and launched["exit_codes"] == [0, 0] and trace.engine == "zero1"
    first, second = final_parameters(launched)
    for name, value in first.items():
        assert torch.equal(second[name], value), f"{name} differs between ranks"
    expected = single_process(config, trace)
    for name, value in first.items():
        assert torch.allclose(value, expected[name].detach(), atol=TOLERANCE, rtol=0), name
    assert not torch.allclose(first["fc.weight"], tutorial.build(config)[0].fc.weight.detach())  # it trained


def test_the_command_line_runs_zero1_with_adam(tmp_path, capsys):
    assert main(["--engine", "zero1", "--optimizer", "adam", "--train", "--gpus", "2", "--data-size", "20",
                 "--trace", str(tmp_path / "run.json")]) == 0
    trace = trace_json.loads((tmp_path / "run.json").read_text())
    assert (trace.engine, trace.config.optimizer, trace.spec.label) == ("zero1", "adam", "ZeRO-1")
    assert "Let's use 2 ranks!" in capsys.readouterr().out


def test_the_page_offers_zero1_and_the_optimizer():
    from test_app import page

    app = page(engine="zero1", gpus="2", train="true", optimizer="adam")
    assert not app.exception and app.header[0].value == "How ZeRO-1 shares the optimizer's state"
    assert app.radio(key="engine_choice").value == "zero1" and app.radio(key="optimizer").value == "adam"
    assert app.get("plotly_chart") and app.query_params["optimizer"] == "adam"
    app.radio(key="optimizer").set_value("sgd").run()
    assert not app.exception and app.query_params["optimizer"] == "sgd" and app.query_params["engine"] == "zero1"


def model_elements(config: RunConfig) -> int:
    return sum(p.numel() for p in tutorial.build(config)[0].parameters())


@pytest.mark.parametrize("engine", ["ddp", "zero1"])
def test_each_ranks_optimizer_state_is_what_its_torch_optimizer_holds(engine):
    config, launched, trace = run(engine, **ADAM)
    assert trace.failure is None
    for rank, report in enumerate(launched["ranks"]):
        tensors = [value for kept in report["optimizer_state"] for value in kept.values() if value.ndim > 0]
        held = trace.facts["held"][rank]
        assert held["optimizer state"] == {"elements": sum(v.size for v in tensors), "bytes": sum(v.nbytes for v in tensors)}
        model = sum(value.size for value in report["parameters"].values())
        assert held["parameters"] == held["gradients"] == {"elements": model, "bytes": 4 * model}  # float32, all of it
        assert model == model_elements(config)


def test_with_adam_every_ddp_rank_holds_twice_the_parameters_as_state():
    config, _, trace = run("ddp", **ADAM)
    model = model_elements(config)
    for held in trace.facts["held"]:
        assert held["optimizer state"]["elements"] == 2 * model
        assert sorted(name for name, _ in held["owns"]) == sorted(n for n, _ in tutorial.build(config)[0].named_parameters())


def test_with_adam_zero1s_shards_sum_to_twice_the_parameters_split_by_whole_parameters():
    config, _, trace = run(**ADAM)
    model = model_elements(config)
    held = trace.facts["held"]
    states = [rank["optimizer state"]["elements"] for rank in held]
    assert sum(states) == 2 * model
    sizes = dict(tutorial.build(config)[0].named_parameters())
    for rank in held:  # each rank keeps both of Adam's moments for every element of the parameters it owns, and no more
        assert all(elements == sizes[name].numel() for name, elements in rank["owns"])
        assert rank["optimizer state"]["elements"] == 2 * sum(elements for _, elements in rank["owns"])
    assert sorted(states) == [2 * (model - 1024), 2 * 1024]  # the large weight alone on one rank: 1,024 against 82
    assert held[0]["parameters"] == held[1]["parameters"]  # every rank still holds the whole model


@pytest.fixture
def fake_world():
    """A process group of 2 in this process on torch's fake backend: ZeroRedundancyOptimizer partitions as on
    rank 0 of 2 real ranks, with no peer to talk to."""
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("settings", [ADAM, dict(batch_size=20, data_size=40)])
def test_the_recorded_partition_is_zero_redundancy_optimizers_own(settings, fake_world):
    config, _, trace = run(**settings)
    model = tutorial.build(config)[0]
    kind, options = tutorial.optimizer_of(config)
    names = {id(p): name for name, p in model.named_parameters()}
    own = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=kind, **options)._partition_parameters()
    expected = [[[names[id(p)], p.numel()] for group in groups for p in group["params"]] for groups in own]
    assert [rank["owns"] for rank in trace.facts["held"]] == expected
    assert all(expected)  # both ranks own some


def test_a_trace_round_trips_and_a_partition_zero1_cannot_make_is_refused():
    _, _, trace = run(**ADAM)
    text = trace_json.dumps(trace)
    assert trace_json.dumps(trace_json.loads(text)) == text
    document = json.loads(text)
    first, second = document["facts"]["held"]
    second["owns"].append(first["owns"][0])  # one parameter stepped by both ranks
    with pytest.raises(TraceError, match="stepped by rank 0 and rank 1"):
        trace_json.loads(json.dumps(document))
    document["engine"] = document["config"]["engine"] = "ddp"  # DDP's rule: every rank steps every parameter
    with pytest.raises(TraceError, match="under DDP every rank steps the same ones"):
        trace_json.loads(json.dumps(document))


def _torch_state_bytes(launched) -> list[int]:
    """The bytes of optimizer state each rank's own torch optimizer holds (its state_dict's tensors)."""
    return [sum(value.nbytes for kept in report["optimizer_state"] for value in kept.values() if value.ndim > 0)
            for report in launched["ranks"]]


def test_what_happened_says_which_parameters_each_rank_owns_and_the_state_it_holds(fake_world):
    """ZeRO-1's explanation is its own: ZeroRedundancyOptimizer over DDP, each rank's parameters (torch's own
    partition) and the bytes of state its torch optimizer holds, the broadcasts after the step (the model's bytes,
    as torch's parameters weigh them), never DDP's "parameters never move"."""
    from dpviz.analysis.explain import explain
    from dpviz.analysis.summary import key_figures
    from dpviz.analysis.wording import human_bytes, plural

    config, launched, trace = run(**ADAM)
    model = tutorial.build(config)[0]
    kind, options = tutorial.optimizer_of(config)
    names = {id(p): name for name, p in model.named_parameters()}
    own = [[names[id(p)] for group in groups for p in group["params"]]
           for groups in ZeroRedundancyOptimizer(model.parameters(), optimizer_class=kind, **options)._partition_parameters()]
    words = " ".join(explain(trace))
    assert "ZeroRedundancyOptimizer over DistributedDataParallel" in words and "never move" not in words
    states = _torch_state_bytes(launched)
    for rank, (params, state) in enumerate(zip(own, states)):
        elements = sum(dict(model.named_parameters())[name].numel() for name in params)
        assert f"rank {rank} owns `{params[0]}`" in words  # the largest it owns first, as torch hands them out
        assert f"({plural(elements, 'element')}, {human_bytes(state)} of state)" in words
    assert f"rank {states.index(max(states))} holds {max(states) / sum(states):.0%} of the state" in words
    model_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert f"broadcasts of {human_bytes(model_bytes)} of parameters in all" in words
    figures = key_figures(trace)
    assert figures[f"optimizer state per rank (its shard of {human_bytes(sum(states))})"] == \
        f"{human_bytes(min(states))}–{human_bytes(max(states))}"


def test_the_memory_caption_states_the_optimizer_states_split():
    from dpviz.analysis.batch_facts import memory_batches
    from dpviz.figures import memory_figure
    from dpviz.figures.byte_unit import byte_unit
    from dpviz.figures.memory import prepare_memory

    _, launched, trace = run(**ADAM)
    states = _torch_state_bytes(launched)
    for batch in memory_batches(trace):
        (caption,) = [a.text.replace("<br />", " ").replace("<br>", " ") for a in memory_figure(trace, batch).layout.annotations]
        assert "optimizer state only for the parameters it owns: about 1/2 of it, uneven by whole parameters" in caption
        unit = byte_unit(float(prepare_memory(trace, batch)["total"].max()))  # the one unit the figure writes
        for rank, state in enumerate(states):
            assert f"rank {rank} {unit.amount(state)}" in caption
        assert f"(of {unit.amount(sum(states))})" in caption


def test_forward_only_zero1_says_there_is_no_optimizer_state_to_shard():
    from dpviz.analysis.explain import explain
    from dpviz.engines import engine
    from dpviz.figures import memory_figure

    trace = engine("zero1").record(RunConfig(engine="zero1"))  # the page's defaults: forward only
    words = " ".join(explain(trace))
    assert "No optimizer, nothing sharded" in words and "never move" in words  # nothing moves after DDP()'s broadcast
    (caption,) = [a.text for a in memory_figure(trace).layout.annotations]
    assert "no state to shard" in caption and "each rank the same" in caption and " to " not in caption.split("</b>")[0]


def test_one_steps_title_says_what_zero1_holds_beside_ddps_rows():
    # ZeRO-1's One step opened with DDP's title ("each rank its own rows"), its lesson only inside the boxes: the title
    # says each rank keeps the optimizer's state of the parameters it owns; and the state the boxes give each rank is
    # what its torch optimizer held, a part of DDP's whole (ZeRO-1's shards, under Adam: two moments of each).
    from dpviz.engines.ddp.read.one_step import one_step_ddp
    from dpviz.figures.text_fit import unwrap

    titles = {}
    for engine in ("ddp", "zero1"):
        _, _, trace = run(engine, **ADAM)
        titles[engine] = unwrap(one_step_ddp(trace, len(trace.batches) - 1).title)
    assert titles["ddp"].endswith("each rank its own rows")
    assert titles["zero1"].endswith("each rank its own rows and the optimizer's state of only the parameters it owns")
    zero1 = [run("zero1", **ADAM)[2].facts["held"][r]["optimizer state"]["bytes"] for r in range(2)]
    ddp = [run("ddp", **ADAM)[2].facts["held"][r]["optimizer state"]["bytes"] for r in range(2)]
    assert sum(zero1) == ddp[0] == ddp[1] and all(0 < part < ddp[0] for part in zero1)  # shards of one whole

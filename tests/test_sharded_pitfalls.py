"""Where the memory goes: the presets of DDP with Adam, ZeRO-1 and FSDP, each run live and checked against torch.

Each preset's run must show what its text says, with the numbers torch gives: the model's parameter counts from
the model itself, ZeroRedundancyOptimizer's own partition, and FSDP2's all-gathers with reshard_after_forward off
against on. Every run's trace must load (its engine's check) and open on a view its engine draws.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from collections import Counter

import pytest
import torch
import torch.distributed as dist

with warnings.catch_warnings():  # torch.distributed.optim scripts its functional optimizers on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.testing._internal.distributed.fake_pg import FakeStore

from dpviz.engines import ENGINES, engine
from dpviz.engines.workload.units import shard_units
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.figures.views import VIEWS
from dpviz.presets import EVERY_ENGINE, ALL_PRESETS, SHARDED_PRESETS, preset_of, presets_of
from dpviz.trace.check import check

from test_ddp_engine import TOLERANCE, single_process


@functools.cache
def run(name: str, **changes):
    config = dataclasses.replace(SHARDED_PRESETS[name].config, **changes)
    trace = engine(config.engine).record(config)
    check(trace)  # every preset's trace is one the page loads
    assert trace.failure is None, trace.failure.headline
    return trace


def model_of(name: str) -> torch.nn.Module:
    return tutorial.build(SHARDED_PRESETS[name].config)[0]


def elements(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_each_preset_is_offered_for_its_engine_and_opens_a_view_it_draws():
    assert {SHARDED_PRESETS[n].config.engine for n in SHARDED_PRESETS} == {"ddp", "zero1", "fsdp"}
    for name, preset in SHARDED_PRESETS.items():
        config = preset.config
        assert ALL_PRESETS[name] is preset and name in presets_of(config.engine) and preset_of(config) is preset
        if preset.opens == EVERY_ENGINE:  # read beside the other engines: that page draws every engine's memory
            assert ENGINES[config.engine].memory_page and ENGINES[config.engine].has("view.memory"), name
        else:
            assert preset.opens in {view.key for view in VIEWS} and ENGINES[config.engine].has(f"view.{preset.opens}"), name
    assert {p.opens for p in SHARDED_PRESETS.values()} >= {EVERY_ENGINE}


def test_a_memory_lesson_opens_the_page_of_every_engine_with_its_banner():
    from streamlit.testing.v1 import AppTest

    from dpviz.page.link import MEMORY, wanted_page

    assert wanted_page({"preset": "zero1-uneven"}) == MEMORY
    assert wanted_page({"preset": "zero1-uneven", "engine": "zero1"}) is None  # a link that names an engine keeps it
    app = AppTest.from_file("../app.py", default_timeout=600)  # three engines' runs start processes: minutes at worst
    app.query_params["preset"] = "zero1-uneven"
    app.run()
    assert not app.exception
    infos = [str(i.value) for i in app.info]
    assert any("ZeRO-1: one large parameter, uneven shards" in i and "Memory, every engine" in i for i in infos), infos
    assert any(i.startswith("**What to look for.**") for i in infos)
    assert [chart.key for chart in app.get("plotly_chart")] == ["memory_chart", "memory_bytes_chart", "real_size_chart"]


def test_with_adam_every_ddp_rank_holds_twice_the_model_as_state_and_zero1_splits_it():
    trace = run("ddp-adam-state")
    model = elements(model_of("ddp-adam-state"))
    ranks = trace.config.gpus
    held = trace.facts["held"]
    assert len(held) == ranks and all(rank["optimizer state"]["elements"] == 2 * model for rank in held)
    look_for = SHARDED_PRESETS["ddp-adam-state"].look_for
    assert f"{model:,} parameters, as many gradients and {2 * model:,} numbers of optimizer state" in look_for
    assert f"each of {ranks} DDP ranks" in look_for and f"its {ranks} ranks' optimizer state adds up to one DDP rank's" in look_for
    zero1 = run("ddp-adam-state", engine="zero1")  # the same run under ZeRO-1: the same state, once in all
    assert sum(rank["optimizer state"]["elements"] for rank in zero1.facts["held"]) == 2 * model
    # The memory view's sample after the step: each rank holds what torch's Adam holds after a step on the whole model
    stepped = {m.lane: m.bytes for m in trace.memory if m.phase == "step" and m.category == "optimizer state"}
    assert sorted(stepped) == list(range(ranks)) and set(stepped.values()) == {adam_state_bytes(model_of("ddp-adam-state"))}
    for rank in range(ranks):
        after_step = {m.category: m.bytes for m in trace.memory if (m.phase, m.lane, m.batch) == ("step", rank, 0)}
        assert max(after_step, key=after_step.get) == "optimizer state"


def adam_state_bytes(model: torch.nn.Module) -> int:
    """Bytes of torch's Adam state after one step per element of a parameter: its two moments (the step counters,
    one number per parameter tensor, left out as every engine's count leaves them)."""
    kind, options = tutorial.optimizer_of(SHARDED_PRESETS["ddp-adam-state"].config)
    optimizer = kind(model.parameters(), **options)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    optimizer.step()
    return sum(t.numel() * t.element_size() for state in optimizer.state.values() for t in state.values() if t.dim() > 0)


@pytest.fixture
def fake_world():
    """A process group of 4 in this process on torch's fake backend: ZeroRedundancyOptimizer partitions as on 4 ranks."""
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=SHARDED_PRESETS["zero1-uneven"].config.gpus)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_one_large_parameter_makes_zero1s_shards_uneven_as_torch_partitions_them(fake_world):
    trace = run("zero1-uneven")
    config = trace.config
    model = model_of("zero1-uneven")
    kind, options = tutorial.optimizer_of(config)
    partition = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=kind, **options)._partition_parameters()
    owned = [sum(p.numel() for group in groups for p in group["params"]) for groups in partition]
    states = [rank["optimizer state"]["elements"] for rank in trace.facts["held"]]
    assert states == [2 * n for n in owned]  # Adam's two moments of the whole parameters each rank owns
    largest, total = max(p.numel() for p in model.parameters()), elements(model)
    assert max(owned) == largest and sum(owned) == total  # the large weight alone on one rank
    look_for = SHARDED_PRESETS["zero1-uneven"].look_for
    assert f"holds {largest:,} of the model's {total:,} elements" in look_for
    assert f"Adam's state of {largest:,}" in look_for and f"share that of {total - largest:,}" in look_for
    assert f"on {config.gpus} ranks" in look_for


def collectives(trace, phase: str) -> Counter:
    """Per (step, rank): the spans of `phase`, one per sharded module that ran it."""
    return Counter((s.batch, s.lane) for s in trace.spans if s.phase == phase)


def test_keeping_fsdps_modules_whole_skips_the_backward_all_gathers_and_holds_the_whole_model():
    kept, default = run("fsdp-keep-gathered"), run("fsdp-keep-gathered", reshard_after_forward=True)
    model = model_of("fsdp-keep-gathered")
    units = len(shard_units(model))
    ranks, steps = kept.config.gpus, len(kept.batches)
    every = {(step, rank): units for step in range(steps) for rank in range(ranks)}
    assert collectives(kept, "gather") == collectives(default, "gather") == every
    assert collectives(default, "gather_backward") == every and not collectives(kept, "gather_backward")
    assert not collectives(kept, "reshard") and collectives(default, "reshard") == every
    # Every module whole at once: the model, as FSDP2's all-gather outputs hold it, each parameter's dim 0 padded to
    # a multiple of the ranks (FSDP2 shards evenly: ceil(rows / ranks) rows each).
    whole = sum(-(-p.shape[0] // ranks) * ranks * (p.numel() // p.shape[0]) * p.element_size() for p in model.parameters())
    assert whole > sum(p.numel() * p.element_size() for p in model.parameters())  # this model has rows to pad
    after_forward = {(m.batch, m.lane): m.bytes for m in kept.memory
                     if m.phase == "forward" and m.category == "gathered parameters"}
    assert after_forward and set(after_forward.values()) == {whole}
    assert not [m for m in default.memory if m.phase == "forward" and m.category == "gathered parameters"]
    words = " ".join(kept.spec.part("explain")(kept))
    assert "reshard_after_forward=False" in words and f"{units} all-gathers ran in forward and 0 all-gathers" in words


def test_keeping_fsdps_modules_whole_still_trains_as_one_process():
    from dpviz.config import RunConfig
    from dpviz.engines.ranks.launch import launch
    from dpviz.engines.ddp.merge import to_trace

    config = RunConfig(**{**SHARDED_PRESETS["fsdp-keep-gathered"].config.to_dict(), "backend": "auto",
                          "data_size": 36, "batch_size": 12})
    launched = launch(config, keep_parameters=True)
    trace = to_trace(config, launched, backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    expected = single_process(config, trace)
    for name, value in launched["ranks"][0]["parameters"].items():
        assert torch.allclose(torch.from_numpy(value), expected[name].detach(), atol=TOLERANCE, rtol=0), name


def test_fsdps_one_step_says_its_backward_gathers_only_where_the_run_gathered_in_backward():
    """The Backward boxes read "gathers / keeps 1/2" with reshard_after_forward=False too, where the run's backward
    all-gathered nothing. Each box now says what the rank's own spans recorded in that step."""
    from dpviz.engines.fsdp.read.one_step import one_step_fsdp

    for trace in (run("fsdp-keep-gathered"), run("fsdp-keep-gathered", reshard_after_forward=True)):
        gathered, freed = collectives(trace, "gather_backward"), collectives(trace, "reshard")
        for step in range(len(trace.batches)):
            drawn = one_step_fsdp(trace, step)
            for rank in range(trace.config.gpus):
                backward, forward = drawn.cells[(rank, "backward")], drawn.cells[(rank, "forward")]
                assert ("gathers" in backward.lines) == bool(gathered[(step, rank)]), (step, rank, backward.lines)
                assert ("no all-gather" in backward.lines) == (not gathered[(step, rank)])
                assert ("gathers each module's parameters again" in backward.hover) == bool(gathered[(step, rank)])
                assert ("frees them after" in forward.hover) == bool(freed[(step, rank)]), forward.hover
            moves = {a.name for a in drawn.moves_in("backward")}
            assert ("all-gather" in moves) == any(gathered[(step, r)] for r in range(trace.config.gpus))
    assert not collectives(run("fsdp-keep-gathered"), "gather_backward")  # the preset the review read gathers none


def test_the_timeline_of_modules_kept_whole_says_in_its_title_that_backward_gathers_nothing():
    # fsdp-keep-gathered's lesson was only in the notes, under the fold on a projector: the title says it, where the
    # run's backward ran no all-gather (as test_keeping_fsdps_modules_whole_skips_the_backward_all_gathers counts them),
    # and a run that reshards after forward keeps the plain title.
    from dpviz.engines.ddp.read.timeline import timeline_ddp_figure
    from dpviz.figures.text_fit import unwrap

    for trace, says in ((run("fsdp-keep-gathered"), True), (run("fsdp-keep-gathered", reshard_after_forward=True), False)):
        title = unwrap(timeline_ddp_figure(trace, 0, len(trace.batches) - 1).layout.title.text)
        assert ("no all-gather in backward" in title) == says == (not collectives(trace, "gather_backward")), title

"""A rank whose batches ran out (rows split by hand, `uneven`) waits at the end holding its model's state, at a
barrier or in join's shadowing: the Memory page's last step shows what it holds there, labelled as waiting, never 0.
Torch is the oracle: one plain process steps the same model with the same optimizer once, and its parameters,
gradients and optimizer state are what the waiting rank holds; under ZeRO-1 the state of its own shard is what
torch's own optimizer on that rank counted at the end (its held facts)."""
from __future__ import annotations

import dataclasses
from functools import cache

import torch

from dpviz.analysis.batch_facts import waiting_lanes
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.workload.models import build_model, random_rows
from dpviz.engines.workload.tutorial_data import optimizer_of
from dpviz.figures.memory import memory_figure, prepare_memory
from dpviz.presets import DDP_PRESETS
from dpviz.trace.check import check

STATE = ("parameters", "gradients", "optimizer state")


@cache
def recorded(name: str = "ddp", **changes):
    config = dataclasses.replace(DDP_PRESETS["ddp-uneven"].config, engine=name, **changes)
    trace = engine(name).record(config)
    check(trace)  # the page loads it
    return trace


def torch_state(config: RunConfig) -> dict[str, int]:
    """Bytes of the parameters, gradients and optimizer state of the model after one plain optimizer step."""
    model, _ = build_model(config.model, config.input_size, config.output_size)
    kind, settings = optimizer_of(config)
    optimizer = kind(model.parameters(), **settings)
    model(random_rows(config.model, config.input_size, 3)).square().mean().backward()
    optimizer.step()
    state = [v for kept in optimizer.state.values() for v in kept.values() if torch.is_tensor(v) and v.dim() > 0]
    return {"parameters": sum(p.nbytes for p in model.parameters()),
            "gradients": sum(p.grad.nbytes for p in model.parameters()),
            "optimizer state": sum(t.nbytes for t in state)}


def held_at(trace, step: int, lane: int) -> dict[str, dict[str, int]]:
    """Per phase of `step`, what `lane` holds by kind."""
    out: dict[str, dict[str, int]] = {}
    for m in trace.memory:
        if m.batch == step and m.lane == lane:
            out.setdefault(m.phase, {})[m.category] = m.bytes
    return out


def check_waiting(trace, waiting: list[int]) -> None:
    last = trace.config.num_batches - 1
    assert waiting_lanes(trace, last) == {lane: last - 1 for lane in waiting}
    assert waiting_lanes(trace, 0) == {}
    running = [lane.id for lane in trace.lanes if lane.id not in waiting]
    phases = held_at(trace, last, running[0])
    for lane in waiting:
        mine = held_at(trace, last, lane)
        assert list(mine) == list(phases)  # a cell in every row the others have
        for kinds in mine.values():
            held = trace.facts["held"][lane]  # torch's own count of this rank's tensors at the end
            assert {k: kinds.get(k, 0) for k in STATE} == {k: held[k]["bytes"] for k in STATE}
            # nothing of a step it did not run (a ZeRO-1 rank that owns no parameter keeps no optimizer state)
            assert {"parameters", "gradients"} <= set(kinds) <= {*STATE, "gradient buckets"}
            assert kinds["gradient buckets"] == next(iter(phases.values()))["gradient buckets"]
    table = prepare_memory(trace, last)
    totals = table.drop_duplicates(["step", "device"])
    assert (totals.loc[totals["device"].isin(waiting), "total"] > 0).all()


def test_ranks_out_of_batches_hold_their_state_at_the_last_step():
    trace = recorded()
    assert trace.failure is not None and trace.failure.batch == 3  # rank 0's fourth all-reduce waited in vain
    check_waiting(trace, [1, 2])
    oracle = torch_state(trace.config)
    for lane in (1, 2):
        for kinds in held_at(trace, 3, lane).values():
            assert {k: kinds[k] for k in STATE} == oracle


def test_the_memory_chart_says_which_ranks_wait():
    trace = recorded()
    figure = memory_figure(trace, 3)
    words = str(figure.layout.title.subtitle.text).replace("<br />", " ").replace("<br>", " ")
    assert "ranks 1 and 2, out of batches after step 3, wait at the end holding their state" in words
    for axis in (figure.layout.xaxis, figure.layout.xaxis2):  # under the grid and the bars
        assert list(axis.ticktext) == ["rank 0", "rank 1<br>waiting", "rank 2<br>waiting"]
    grid = figure.data[0]
    columns = list(grid.x)
    for row in grid.customdata:
        for name, hover in zip(columns, row):
            assert ("waiting at the end" in hover) == (name in ("rank 1", "rank 2"))
    assert "waiting" not in str(memory_figure(trace, 0).to_dict())  # every rank ran step 1


def test_under_join_the_ranks_out_of_batches_hold_their_state_too():
    trace = recorded(join=True)
    assert trace.failure is None
    check_waiting(trace, [1, 2])


def test_zero1_ranks_out_of_batches_hold_their_shard_of_the_state():
    trace = recorded("zero1", join=True, optimizer="adam")
    assert trace.failure is None
    check_waiting(trace, [1, 2])


def test_a_dataparallel_gpu_without_a_chunk_holds_nothing_and_is_not_waiting():
    # The last batch has one row: GPUs 1-3 get no chunk, and DataParallel's replicas are gone after each forward.
    config = RunConfig(gpus=4, batch_size=8, data_size=9, train=True)
    trace = engine("dp").record(config)
    last = len(trace.batches) - 1
    assert waiting_lanes(trace, last) == {}
    assert "waiting" not in str(memory_figure(trace, last).to_dict())

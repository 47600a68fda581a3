"""ZeRO-1's One step: every rank's broadcast figure counts the same thing, and the hover says which way it went.

The boxes read "■ 40 B" and "■ 8 B" on the owners (only what each sent) and "■ 48 B" on ranks 2 and 3, which own
nothing and only receive: a class read ranks 2 and 3 as broadcasting the most. Every rank now shows what it handed
the broadcasts, as the all-reduce's figure counts what it handed that (the owner's shard it sent and the others' it
received, together: the whole model on every rank), the subtitle says so, and the hover splits it: what it sent
(the parameters it owns, as ZeroRedundancyOptimizer partitions them) and what it received.
"""
from __future__ import annotations

import functools
import re

import pytest
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.testing._internal.distributed.fake_pg import FakeStore

from dpviz.analysis.one_step import short_bytes
from dpviz.analysis.wording import human_bytes
from dpviz.config import RunConfig
from dpviz.engines.ddp.merge import to_trace
from dpviz.engines.ddp.read.one_step import one_step_ddp_figure
from dpviz.engines.ranks.launch import launch
from dpviz.engines.workload import tutorial_data as tutorial

RANKS = 4  # the tutorial's Linear(5, 2) has 2 parameters: two ranks own one each, two own none


@functools.cache
def run():
    config = RunConfig(engine="zero1", gpus=RANKS, train=True, batch_size=20, data_size=40)
    trace = to_trace(config, launch(config), backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    assert trace.failure is None
    return config, trace


@pytest.fixture
def fake_world():
    """ZeroRedundancyOptimizer partitions as rank 0 of RANKS real ranks would, on torch's fake backend."""
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=RANKS)
    try:
        yield
    finally:
        dist.destroy_process_group()


def owned_bytes(config: RunConfig) -> list[int]:
    model = tutorial.build(config)[0]
    kind, options = tutorial.optimizer_of(config)
    partition = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=kind, **options)._partition_parameters()
    return [sum(p.numel() * p.element_size() for group in groups for p in group["params"]) for groups in partition]


def broadcast_lines(figure, box: str) -> dict[int, list[str]]:
    """Rank -> the figures in its box that starts with `box`, as drawn (markup and swatch stripped)."""
    boxes = {}
    for note in figure.layout.annotations:
        if note.text and note.text.startswith(box):
            lines = [re.sub(r"<[^>]+>", "", line) for line in note.text.split("<br>")]
            boxes[round(note.y)] = [line.removeprefix("■ ") for line in lines if line.startswith("■")]
    return boxes


def test_every_rank_shows_what_it_handed_the_broadcasts_and_the_hover_says_which_way(fake_world):
    config, trace = run()
    owned = owned_bytes(config)
    whole = sum(owned)
    assert 0 in owned and len(set(owned)) > 1  # the case the review read: owners of unequal shards, and receivers
    figure = one_step_ddp_figure(trace, 0)
    assert broadcast_lines(figure, "SGD step") == {rank: [short_bytes(whole)] for rank in range(RANKS)}
    # The all-reduce's figure counts the same thing: the gradients each rank handed in, the whole model's again.
    assert broadcast_lines(figure, "backward") == {rank: [short_bytes(whole)] for rank in range(RANKS)}
    hovers = [t for trace_ in figure.data for t in (trace_.hovertext or ()) if t and t.startswith("broadcast")]
    for rank, own in enumerate(owned):
        way = ", ".join(part for part in (f"sends {human_bytes(own)}" if own else "",
                                          f"receives {human_bytes(whole - own)}") if part)
        assert sum(hover.endswith(way) for hover in hovers) >= 1, (rank, way, hovers)
    assert "sent and received together" in figure.layout.title.subtitle.text.replace("<br />", " ")


def test_the_compare_says_zero1s_even_share_of_the_broadcasts_is_an_average(fake_world):
    """Compare said "ZeRO-1: at most 72 B a rank" where every rank was given (W-1)/W of the parameters for the
    broadcasts, though the owners' shards are uneven (whole parameters) and a rank that owns none sends nothing:
    the figure is a mean, and the panel and its sentence now say so."""
    from dpviz.analysis.compare import sends_sentence
    from dpviz.analysis.traffic import sent_per_step
    from dpviz.figures.byte_unit import byte_unit
    from dpviz.figures.compare import panel_title

    config, trace = run()
    owned = owned_bytes(config)
    sent = sent_per_step(trace)
    assert len(set(sent)) == 1  # one figure for every rank ...
    assert len(set(owned)) > 1  # ... of broadcasts torch's partition makes uneven: it cannot be every rank's own
    title = panel_title(trace, byte_unit(max(sent)))
    assert title.endswith("a rank on average") and "at most" not in title, title
    assert "per step on average" in sends_sentence(trace)
    ddp = to_trace(RunConfig(engine="ddp", gpus=RANKS, train=True, batch_size=20, data_size=40),
                   launch(RunConfig(engine="ddp", gpus=RANKS, train=True, batch_size=20, data_size=40)),
                   backend="cpu", torch_version=torch.__version__, machine_gpus=0)
    assert "on average" not in panel_title(ddp, byte_unit(max(sent)))  # a ring all-reduce is even: no mean to say

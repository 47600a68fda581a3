"""The pipeline's bubble, replayed: each pass as long as its own CPU time, laid in the order torch ran it with each
stage on a device of its own, shrinks toward the textbook's (S − 1) / (M + S − 1) as the microbatches grow, whatever
else this host runs; the replay keeps torch's order and the schedule's dependencies; a file without CPU times still
replays, from wall times, and says so.

The runs: four stages of equal layers (each a Linear(1024, 1024) and a Tanh: a few milliseconds of arithmetic per
pass, so each pass's CPU time is its arithmetic and not Python's fixed cost), GPipe, a batch of 128 rows in 4 and in
16 microbatches, 5 steps each.
"""
from __future__ import annotations

import dataclasses
import re
import statistics
from functools import cache

import pytest
import torch
from torch import nn

import dpviz
from dpviz.engines.pipeline.read import bubble
from dpviz.engines.pipeline.read.schedule import schedule_figure, wall_clock_figure
from dpviz.trace import json_io

STAGES, WIDTH, ROWS, STEPS = 4, 1024, 128, 5


@cache
def run(microbatches: int):
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(STAGES)])
    return dpviz.record(model, torch.randn(ROWS, WIDTH), engine="pipeline", gpus=STAGES, train=True,
                        microbatches=microbatches, data_size=ROWS * STEPS)


def replayed(microbatches: int) -> float:
    """The median replayed share over the steps after the first (which also agrees the stages' shapes)."""
    trace = run(microbatches)
    shares = [bubble.replay(trace, step).share for step in range(1, len(trace.batches))]
    assert len(shares) == STEPS - 1 and all(bubble.replay(trace, s).clock == bubble.CPU for s in range(STEPS))
    return statistics.median(shares)


def uneven(stages: int, microbatches: int, r: float) -> float:
    """GPipe's bubble when the busiest stage takes r times the mean stage's time per microbatch: it sets the pace
    of the M − 1 microbatches after the first, so the step is S + (M − 1) r mean passes long for M of work."""
    return 1 - microbatches / (stages + (microbatches - 1) * r)


R = 1.4  # the most uneven the stages' work may be (see the test)


def test_the_replayed_bubble_shrinks_with_more_microbatches_toward_the_textbooks():
    """On 4 stages the replayed share at M = 16 lies at least 0.10 below M = 4's, and each lies between the
    textbook's (S − 1) / (M + S − 1) less 0.03 and uneven(S, M, 1.4): 0.429 to 0.50 at M = 4, 0.158 to 0.35 at 16.

    Why those margins. The textbook's stages each take the same time per pass; then the replay's share is the
    textbook's exactly (held in test_equal_passes_replay_to_the_textbooks_share). These stages' layers are equal, yet
    their work is not quite: the first stage's backward computes no gradient for its input (one of a Linear's two
    matrix products), the last stage's forward also computes the loss, and a pass's CPU time on a shared machine
    varies (caches, other processes' memory traffic). With the busiest stage r times the mean, GPipe's share is
    uneven(S, M, r) = 1 − M / (S + (M − 1) r); r measured 1.2 to 1.25 here, and 1.4 bounds it with room (a host
    whose load inflates one stage's CPU time by a further 15%). So each share lies below uneven(S, M, 1.4), and above
    the textbook's less 0.03 (a lighter stage's passes shorten the fill or drain a little). The two runs have the
    same layers, so the same r: uneven(4, 4, r) − uneven(4, 16, r) = 16 / (4 + 15 r) − 4 / (4 + 3 r) falls from
    0.27 at r = 1 to 0.14 at r = 1.4; 0.10 leaves 0.04 for the two runs' r differing.

    CPU time is what makes this hold on a loaded machine: a pass's thread's CPU time does not count the time it waits
    for a core, which is most of this host's wall clock (its share is shown beside, far above both)."""
    few, many = replayed(4), replayed(16)
    assert few - many >= 0.10, (few, many)
    for microbatches, share in ((4, few), (16, many)):
        textbook = bubble.textbook_share(STAGES, microbatches)
        assert textbook - 0.03 <= share <= uneven(STAGES, microbatches, R), (microbatches, share, textbook)


def test_equal_passes_replay_to_the_textbooks_share():
    """Every pass one second long: the replay is the textbook's grid, its share (S − 1) / (M + S − 1) exactly."""
    for microbatches in (1, 4, 16):
        trace = run(4) if microbatches == 4 else None
        orders = [bubble.schedule_order("gpipe", STAGES, microbatches, s) for s in range(STAGES)]
        laid = bubble.lay_out(orders, lambda kind, stage, micro: 1.0)
        passes = [[(k, m, start, 1.0) for k, m, start in row] for row in laid]
        share = bubble.Replay(passes, bubble.CPU).share
        assert share == pytest.approx(bubble.textbook_share(STAGES, microbatches))
        if trace is not None:
            assert bubble.lay_out([bubble.order(trace, 1, s) for s in range(STAGES)]) == bubble.slots(trace, 1)


def test_the_replay_keeps_torchs_order_and_waits_for_what_each_pass_needs():
    trace = run(4)
    for step in range(len(trace.batches)):
        replay = bubble.replay(trace, step)
        seconds, clock = bubble.pass_seconds(trace, step)
        ends = {}
        for stage, row in enumerate(replay.passes):
            assert [(k, m) for k, m, *_ in row] == bubble.order(trace, step, stage)  # torch's order, as it ran
            free = 0.0
            for kind, micro, start, size in row:
                assert start >= free - 1e-12 and size == seconds[kind, stage, micro] > 0  # one pass at a time
                free = ends[kind, stage, micro] = start + size
        for (kind, stage, micro), end in ends.items():
            start = end - seconds[kind, stage, micro]
            if kind == "F" and stage > 0:
                assert start >= ends["F", stage - 1, micro] - 1e-12
            if kind == "B" and stage < STAGES - 1:
                assert start >= ends["B", stage + 1, micro] - 1e-12
        # Each pass's duration is its thread's CPU time, the last stage's loss counted in its forward.
        kept = {(stage, phase, micro): t for stage, rows in enumerate(trace.facts["cpu"])
                for at, phase, micro, t in rows if at == step}
        for (kind, stage, micro), size in seconds.items():
            want = kept[stage, "forward" if kind == "F" else "backward", micro] + \
                (kept[stage, "loss", micro] if kind == "F" and stage == STAGES - 1 else 0.0)
            assert size == pytest.approx(want)


def test_a_file_without_cpu_times_still_replays_from_wall_times_and_says_so():
    trace = run(4)
    old = json_io.loads(json_io.dumps(dataclasses.replace(
        trace, facts={k: v for k, v in trace.facts.items() if k not in ("cpu", "cores")})))
    replay = bubble.replay(old, 1)
    assert replay.clock == bubble.WALL and bubble.host_cores(old) is None
    spans = {("B" if s.phase == "backward" else "F", s.lane, s.microbatch): 0.0 for s in bubble.computes(old, 1)}
    for s in bubble.computes(old, 1):
        spans["B" if s.phase == "backward" else "F", s.lane, s.microbatch] += s.duration
    assert {(k, stage, m): size for stage, row in enumerate(replay.passes) for k, m, _, size in row} == spans
    words, _ = said(schedule_figure(old, 1))
    assert "keeps no CPU time per pass" in words and "this host's shared cores" in said(wall_clock_figure(old, 1))[0]
    words, _ = said(schedule_figure(trace, 1))
    assert f"idle {bubble.percent(bubble.replay(trace, 1).share)} of the step, replayed" in words
    assert "each pass its own CPU time" in words and "stage 1 is torch's stage_index=0" in words
    # The same step on this host's wall clock, drawn under the replay: its share, and what it ran on.
    clock, _ = said(wall_clock_figure(trace, 1))
    assert f"idle {bubble.percent(bubble.idle_share(trace, 1))}" in clock and f"idle {bubble.percent(bubble.idle_share(trace, 1))}, drawn below" in words
    assert f"{STAGES} processes on this host's {bubble.host_cores(trace):,} core" in clock


def said(fig) -> tuple[str, str]:
    """A figure's title and subtitle, and its panels' titles, as plain text."""
    plain = lambda text: re.sub(r"<br ?/?>", " ", text or "")
    title = fig.layout.title
    return (plain(title.text) + " " + plain(title.subtitle.text),
            " ".join(plain(a.text) for a in fig.layout.annotations))


@cache
def preset(name: str):
    from dpviz.engines import engine
    from dpviz.presets import PIPELINE_PRESETS

    return engine("pipeline").record(PIPELINE_PRESETS[name].config)


def test_each_pipeline_preset_opens_on_its_lesson_and_its_run_shows_what_its_text_says():
    """The presets' words against their own runs, on the step the Schedule opens on: a replayed bubble near 3 / 7 and
    above it, the last stage (the norm and the head) the least work; 16 microbatches' bubble smaller, toward 3 / 19;
    1F1B's first stage keeping 4 microbatches where GPipe's keeps 16; one microbatch idle 3 / 4 replayed (one stage
    at a time: exactly, whatever each pass costs) and more on this host's wall clock, which adds the sends."""
    from dpviz.presets import PIPELINE_PRESETS

    assert {p.opens for p in PIPELINE_PRESETS.values()} <= {"grid", "schedules"}
    shown = {name: bubble.replay(preset(name), bubble.opening_step(preset(name))) for name in PIPELINE_PRESETS}
    four, sixteen = shown["pipeline-bubble"], shown["pipeline-small-bubble"]
    # r up to 1.6: the transformer's first stage holds a block and the embeddings, its last only the norm and head.
    assert bubble.textbook_share(4, 4) - 0.03 <= four.share <= uneven(4, 4, 1.6)
    work = [sum(size for *_, size in stage) for stage in four.passes]
    assert min(work) == work[-1]
    assert bubble.textbook_share(4, 16) - 0.03 <= sixteen.share < four.share
    one = preset("pipeline-one-microbatch")
    assert shown["pipeline-one-microbatch"].share == pytest.approx(0.75, abs=1e-9)
    assert bubble.idle_share(one, bubble.opening_step(one)) > 0.75
    held = {name: bubble.held_most(preset(name), bubble.opening_step(preset(name)))[0]
            for name in ("pipeline-small-bubble", "pipeline-1f1b-memory")}
    assert held == {"pipeline-small-bubble": 16, "pipeline-1f1b-memory": 4}

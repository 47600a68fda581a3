"""DistributedDataParallel's pitfalls, each reproduced live on real processes and checked against what
PyTorch does: its sampler, its reducer's errors, its Join."""
from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from torch.utils.data import DistributedSampler

from dpviz.engines import engine
from dpviz.presets import DDP_PRESETS
from dpviz.trace.check import check


@functools.cache
def run(name: str, **changes):
    config = dataclasses.replace(DDP_PRESETS[name].config, **changes)
    trace = engine("ddp").record(config)
    check(trace)  # every pitfall's trace is one the page loads
    return trace


def rows_of(trace, rank: int, steps=None) -> list[int]:
    return [row for span in trace.spans if span.phase == "forward" and span.lane == rank
            and (steps is None or span.batch in steps) for row in trace.sample_ids(span)]


def test_batch_size_is_per_process_so_the_global_batch_grows_with_the_ranks():
    trace = run("ddp-batch-per-process")
    # 360 rows: 90 a rank, DistributedSampler's shard, in DataLoader batches of 30: 3 steps of 120 rows
    assert trace.failure is None and len(trace.batches) == 3
    assert [s.rows for s in trace.spans if s.phase == "forward"] == [30] * 12
    assert [b.rows for b in trace.batches] == [120] * 3
    assert trace.facts["ddp"]["per_rank_batch"] == 30
    global_batch = run("ddp-batch-per-process", batch_per_process=False)
    assert [b.rows for b in global_batch.batches] == [32] * 11 + [8]  # ceil(30 / 4) = 8 a rank: 90 = 11 × 8 + 2


def test_the_sampler_repeats_the_first_rows_to_even_out_the_ranks():
    trace = run("ddp-padding")
    per_rank = [rows_of(trace, rank) for rank in range(3)]
    assert per_rank == [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    assert per_rank == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]  # rows 0 and 1 twice


def test_drop_last_loses_the_rows_that_do_not_divide():
    trace = run("ddp-drop-last")
    per_rank = [rows_of(trace, rank) for rank in range(3)]
    assert per_rank == [list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False, drop_last=True))
                        for r in range(3)]
    assert 9 not in {row for rows in per_rank for row in rows}


def test_without_set_epoch_every_epoch_repeats_the_first():
    forgot = run("ddp-no-set-epoch")
    per_epoch = len(forgot.batches) // 2
    first, second = range(per_epoch), range(per_epoch, 2 * per_epoch)
    for rank in range(2):
        assert rows_of(forgot, rank, first) == rows_of(forgot, rank, second)
        sampler = DistributedSampler(range(20), num_replicas=2, rank=rank, shuffle=True, seed=0)
        assert rows_of(forgot, rank, first) == list(sampler)
    fixed = run("ddp-no-set-epoch", set_epoch=True)
    for rank in range(2):
        sampler = DistributedSampler(range(20), num_replicas=2, rank=rank, shuffle=True, seed=0)
        sampler.set_epoch(1)
        assert rows_of(fixed, rank, second) == list(sampler) != rows_of(fixed, rank, first)


def test_a_parameter_without_gradient_fails_the_next_step_as_ddp_says():
    trace = run("ddp-unused-parameter")
    assert trace.failure is not None and trace.failure.batch == 1 and trace.failure.type == "RuntimeError"
    assert "Expected to have finished reduction in the prior iteration" in trace.failure.message
    assert not trace.spans_of(0, "allreduce")  # step 0's one bucket never filled: nothing was all-reduced
    fixed = run("ddp-unused-parameter", find_unused=True)
    assert fixed.failure is None and all(fixed.spans_of(b.index, "allreduce") for b in fixed.batches)


def test_uneven_batches_hang_until_the_timeout_and_join_fixes_it():
    trace = run("ddp-uneven")
    assert [len([s for s in trace.spans if s.phase == "forward" and s.lane == r]) for r in range(3)] == [4, 3, 3]
    assert trace.failure is not None and trace.failure.type == "Timeout" and trace.failure.batch == 3
    assert "rank 0 waited 3 s" in trace.failure.message and "ranks 1, 2" in trace.failure.message
    joined = run("ddp-uneven", join=True)
    assert joined.failure is None
    joins = [s for s in joined.spans if s.phase == "join"]
    assert sorted(s.lane for s in joins) == [0, 1, 2]  # every rank enters join's context at its end
    early = [s for s in joins if s.lane in (1, 2)]
    assert all(s.duration > 0 for s in early)


def test_a_step_whose_bucket_never_filled_is_not_called_no_sync():
    from dpviz.analysis.explain import explain
    from dpviz.engines.ddp.read.tables import synced_steps, unreduced_steps

    trace = run("ddp-unused-parameter")
    assert synced_steps(trace)[1] == [] and unreduced_steps(trace) == [0]
    text = " ".join(explain(trace))
    assert "no_sync" not in text and "Backward without all-reduce" in text and "never filled" in text


def test_split_marks_the_step_a_rank_ran_alone_and_only_that_one():
    # The lesson of uneven batches is the hang: Split's title says which rank loaded rows alone, in which step, and
    # its bar carries the mark; a run that failed otherwise, or that join fixed, has neither.
    from dpviz.engines.ddp.read.split import prepare_split_ddp, split_ddp_figure
    from dpviz.figures.text_fit import unwrap

    trace = run("ddp-uneven")
    fig = split_ddp_figure(trace)
    assert "rank 0 alone in step 4" in unwrap(fig.layout.title.text)
    marks = [a for a in fig.layout.annotations if a.name == "left alone"]
    table = prepare_split_ddp(trace)
    lone = table[(table["first_batch"] == 3) & (table["rows"] > 0)]
    assert lone["device"].tolist() == [0] and len(marks) == 1
    assert marks[0].x == table.drop_duplicates("bar")["label"].tolist().index("4")  # over step 4's slot
    assert marks[0].y == lone["rows"].sum() and tuple(fig.layout.xaxis.range) == (-0.5, 3.5)
    for other in (run("ddp-uneven", join=True), run("ddp-unused-parameter"), run("ddp-padding")):
        fig = split_ddp_figure(other)
        assert not [a for a in fig.layout.annotations if a.name == "left alone"]
        assert "alone" not in fig.layout.title.text


def test_the_sample_map_marks_where_each_epoch_starts_and_says_when_they_repeat():
    # set_epoch forgotten, the lesson is that epoch 2's rows repeat epoch 1's: the title says so and the map names each
    # epoch beside its first step, a dashed line between them; with set_epoch the epochs are marked, the title plain.
    from dpviz.engines.ddp.read.sample_map import sample_map_ddp_figure
    from dpviz.figures.sizes import FONT_SIZE
    from dpviz.figures.text_fit import text_px, unwrap

    for set_epoch in (False, True):
        trace = run("ddp-no-set-epoch", set_epoch=set_epoch)
        fig = sample_map_ddp_figure(trace)
        steps = len(trace.batches) // trace.config.epochs
        names = {a.name: a.y for a in fig.layout.annotations if (a.name or "").startswith("epoch ")}
        assert names == {f"epoch {e + 1}": e * steps + 1 for e in range(trace.config.epochs)}  # steps counted from 1
        lines = [s for s in fig.layout.shapes if (s.name or "").startswith("epoch ")]
        assert [(s.y0, s.yref) for s in lines] == [(steps + 0.5, "y")]  # between epoch 1's last step and epoch 2's first
        repeated = "every epoch loads the same rows in the same order" in unwrap(fig.layout.title.text)
        assert repeated == (not set_epoch)
        assert not repeated or unwrap(fig.layout.title.text).startswith("2 epochs of 20 rows")  # rows, not row loads
        assert fig.layout.margin.r >= text_px("epoch 2", FONT_SIZE) + 6  # the names whole in the right margin
    single = sample_map_ddp_figure(run("ddp-padding"))  # one epoch: nothing to tell apart
    assert not [a for a in single.layout.annotations if (a.name or "").startswith("epoch ")]


def test_the_timeline_legend_says_which_phase_lies_outside_the_window_it_opens_on():
    # The timeline opens on the steps; DDP()'s broadcast ran before step 1, left of that window: its legend entry
    # says so (a class looked for its colour in vain), and an entry for a phase drawn in the window does not.
    from dpviz.engines.ddp.read.timeline import timeline_ddp_figure

    trace = run("ddp-unused-parameter")
    fig = timeline_ddp_figure(trace, 0, len(trace.batches) - 1)
    low, high = fig.layout.xaxis.range
    names = {t.name: t for t in fig.data if t.showlegend is not False and t.name}
    assert "DDP() broadcast<br>(left\u00a0of\u00a0view)" in names and "DDP() broadcast" not in names
    broadcast = [s for s in trace.spans if s.phase == "broadcast"]
    first = min(s.start for s in trace.spans)
    assert broadcast and all((s.end - first) * 1e3 <= low for s in broadcast)  # the spans the legend says are left
    assert "forward" in names and all("of view" not in name for name in names if not name.startswith("DDP() broadcast"))

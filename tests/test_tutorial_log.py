"""The tutorial's printed output, rebuilt from a trace, matches what the tutorial publishes."""
from collections import Counter

import pytest

from dpviz import RunConfig, record
from dpviz.exports.tutorial_log import tutorial_log


def _in(rows):
    return f"\tIn Model: input size torch.Size([{rows}, 5]) output size torch.Size([{rows}, 2])"


def _out(rows):
    return f"Outside: input size torch.Size([{rows}, 5]) output_size torch.Size([{rows}, 2])"


# The tutorial's published output for 100 rows in batches of 30 (facts sheet, section 10).
PUBLISHED = {
    1: [[_in(30)], [_in(30)], [_in(30)], [_in(10)]],
    2: [[_in(15)] * 2] * 3 + [[_in(5)] * 2],
    3: [[_in(10)] * 3] * 3 + [[_in(4), _in(4), _in(2)]],
    8: [[_in(4)] * 7 + [_in(2)]] * 3 + [[_in(2)] * 5],
}


@pytest.mark.parametrize("gpus", sorted(PUBLISHED))
def test_log_matches_the_published_tutorial_output(gpus):
    lines = tutorial_log(record(RunConfig(gpus=gpus))).splitlines()
    if gpus > 1:
        assert lines.pop(0) == f"Let's use {gpus} GPUs! (simulated: CPU threads stand in for the GPUs)"
    batches, current = [], []
    for line in lines:
        if line.startswith("Outside"):
            batches.append((current, line))
            current = []
        else:
            current.append(line)
    assert [out for _, out in batches] == [_out(30)] * 3 + [_out(10)]
    # Replicas print in the order they finish, which varies from run to run, as in the tutorial.
    assert [Counter(ins) for ins, _ in batches] == [Counter(ins) for ins in PUBLISHED[gpus]]


def test_replica_lines_follow_completion_order():
    trace = record(RunConfig(gpus=4, data_size=8, batch_size=8))
    finished = sorted(trace.replicas(0), key=lambda s: s.order)
    lines = tutorial_log(trace).splitlines()[1:-1]
    assert lines == [_in(s.rows) for s in finished]


# ---- DistributedDataParallel: a line per rank per step, in the tutorial's spirit

def _rank(rank, rows):
    return f"rank {rank}: input size torch.Size([{rows}, 5]) output size torch.Size([{rows}, 2])"


@pytest.fixture(scope="module")
def ddp_runs():
    """Two real gloo runs: 4 ranks training (8 rows each a step, a global batch of 32 for batch_size 30),
    and 3 ranks over 10 rows accumulating over 2 steps (the sampler pads 2 rows into the last step)."""
    return {
        "four": record(RunConfig(engine="ddp", gpus=4, train=True)),
        "padded": record(RunConfig(engine="ddp", gpus=3, data_size=10, batch_size=6, train=True, accumulate=2)),
    }


def _steps(lines):
    """The log's lines after its header, cut into steps: (opening "Step N of T" line, rank lines)."""
    steps = []
    for line in lines:
        if line.startswith("Step "):
            steps.append((line, []))
        else:
            assert steps, f"{line!r} comes before any step's line"
            steps[-1][1].append(line)
    return steps


def test_ddp_log_says_ranks_are_processes_and_the_global_batch_each_rank_loads(ddp_runs):
    lines = tutorial_log(ddp_runs["four"]).splitlines()
    assert lines[0] == ("Let's use 4 ranks! (4 processes on the CPU, gloo; each rank loads ceil(30 / 4) = 8 rows "
                        "per step, a global batch of 32, not batch_size 30)")
    assert "GPU" not in "\n".join(lines)
    padded = tutorial_log(ddp_runs["padded"]).splitlines()[0]
    assert padded.endswith("each rank loads ceil(6 / 3) = 2 rows per step, a global batch of 6, as batch_size says)")


def test_ddp_log_has_each_ranks_sizes_in_every_step_as_distributed_sampler_deals_them(ddp_runs):
    trace = ddp_runs["four"]
    steps = _steps(tutorial_log(trace).splitlines()[1:])
    # DistributedSampler gives each of 4 ranks ceil(100 / 4) = 25 rows: steps of 8, 8, 8 and 1.
    assert [Counter(ranks) for _, ranks in steps] == [Counter(_rank(r, n) for r in range(4)) for n in (8, 8, 8, 1)]
    for step, (opening, ranks) in enumerate(steps):
        forwards = sorted(trace.spans_of(step, "forward"), key=lambda s: s.end)
        assert [int(line.split(":")[0].split()[1]) for line in ranks] == [s.lane for s in forwards]  # as they finished
        buckets = {s.group for s in trace.spans_of(step, "allreduce")}
        assert buckets and opening == (f"Step {step + 1} of 4: {4 * (8 if step < 3 else 1)} rows on 4 ranks, each rank keeps its "
                                       f"own output (no gather); gradients averaged over the ranks in "
                                       f"{len(buckets)} bucket{'s' if len(buckets) > 1 else ''} all-reduced")


def test_ddp_log_prints_each_step_line_before_that_steps_rank_lines(ddp_runs):
    lines = tutorial_log(ddp_runs["four"]).splitlines()[1:]
    opening = [i for i, line in enumerate(lines) if line.startswith("Step ")]
    # Counted from 1, as every view counts steps; each followed by its 4 ranks' lines, the next step after them.
    assert [lines[i].split(":")[0] for i in opening] == [f"Step {k} of 4" for k in range(1, 5)]
    assert opening == [0, 5, 10, 15] and len(lines) == 20
    assert all(lines[i + 1].startswith("rank ") for i in opening)


def test_ddp_log_shows_no_sync_steps_and_the_samplers_padding(ddp_runs):
    from torch.utils.data import DistributedSampler

    steps = _steps(tutorial_log(ddp_runs["padded"]).splitlines()[1:])
    assert len(steps) == 2 and all(Counter(ranks) == Counter(_rank(r, 2) for r in range(3)) for _, ranks in steps)
    assert steps[0][0].endswith("; no all-reduce: under no_sync the gradients add up until step 2")
    assert steps[1][0].endswith("in 1 bucket all-reduced")
    # torch's sampler: 3 ranks x ceil(10 / 3) = 12 rows for 10, the first 2 of its order repeated at the end.
    dealt = [list(DistributedSampler(range(10), num_replicas=3, rank=r, seed=0)) for r in range(3)]
    repeats = sum(len(rows) for rows in dealt) - len({row for rows in dealt for row in rows})
    assert repeats == 2 and f"({repeats} repeated by the sampler's padding)" in steps[1][0]
    assert "repeated" not in steps[0][0]


def test_a_lane_name_from_a_file_stays_on_one_line_and_short(ddp_runs):
    import dataclasses

    from dpviz.trace import Lane

    trace = ddp_runs["padded"]
    odd = dataclasses.replace(trace, lanes=[Lane(0, "rank 0 (process on the CPU)"), Lane(1, "node 1\nrank 0" * 40),
                                            Lane(2, "rank 2")])
    lines = tutorial_log(odd).splitlines()
    assert len(lines) == len(tutorial_log(trace).splitlines())
    named = [line for line in lines if line.startswith("rank 1 (node 1 rank 0")]
    assert len(named) == 2 and all(len(line) < 150 for line in named)
    assert any(line.startswith("rank 0: ") for line in lines) and any(line.startswith("rank 2: ") for line in lines)


def test_a_long_ddp_log_is_bounded_as_the_dataparallel_one(ddp_runs):
    from dpviz.figures.log import bounded_log

    log = bounded_log(ddp_runs["four"], max_lines=6)
    assert len(log.splitlines()) == 7 and "lines left out" in log
    assert log.splitlines()[0].startswith("Let's use 4 ranks!")


def test_the_page_holds_each_printed_shape_on_one_line_and_changes_nothing_else():
    import re
    import torch
    from dpviz.page.tabs import shapes_unbroken

    log = tutorial_log(record(RunConfig(gpus=3, model="gru", batch_size=7, data_size=10)))
    shown = shapes_unbroken(log)
    printed = [str(torch.Size(shape)) for shape in ([7, 6, 5], [3, 6, 2])]  # how torch prints a shape
    assert all(" " in p for p in printed)  # torch's own words have a space a wrapped line could break at
    shapes = re.findall(r"torch\.Size\(\[[^\]]*\]\)", shown)
    assert shapes and not any(" " in s for s in shapes), shapes  # no ordinary space left inside one
    assert shown.replace("\u00a0", " ") == log  # and the text is otherwise torch's, to the character

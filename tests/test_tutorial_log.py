"""The tutorial's printed output, rebuilt from a trace, matches what the tutorial publishes."""
from collections import Counter

import pytest

from dpviz import RunConfig, record
from dpviz.tutorial_log import tutorial_log


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

"""Memory view: bars are the trace's memory samples, grouped by phase, device 0 the tallest, labelled by kind."""
import dataclasses
from collections import defaultdict

import numpy as np
import pytest

from dpviz.figures import MAX_MARKS, count_marks, memory_figure, prepare_memory
from dpviz.figures.colors import MEMORY_COLORS, device_color
from dpviz.memory import CATEGORIES
from dpviz.summary import human_bytes
from dpviz.trace import MemorySample
from figure_traces import MAX_JSON_BYTES, as_cuda, recorded


def _bars(fig):
    """{(phase, device tick, category): bytes} from the bar traces."""
    out = {}
    for t in fig.data:
        if t.type == "bar":
            phases, ticks = t.x
            for phase, tick, value in zip(phases, ticks, t.y):
                out[(phase, tick, t.name)] = value
    return out


def _samples(trace, batch):
    return {(m.phase, m.lane, m.category): m.bytes for m in trace.memory if m.batch == batch and m.bytes}


def _measured(trace):
    """The trace as real GPUs would record it: one "allocated" sample per device and phase."""
    totals = defaultdict(int)
    for m in trace.memory:
        totals[(m.batch, m.phase, m.lane)] += m.bytes
    memory = [MemorySample(b, p, lane, "allocated", n + 512) for (b, p, lane), n in totals.items()]
    return dataclasses.replace(as_cuda(trace), memory=memory, memory_kind="measured")


@pytest.mark.parametrize("gpus,batch", [(3, None), (3, 3), (8, 3), (1, 0)])
def test_bars_are_the_samples_and_add_up_per_device_and_phase(gpus, batch):
    trace = recorded(gpus=gpus, train=True)
    fig = memory_figure(trace, batch)
    shown = 0 if batch is None else batch
    named = len(prepare_memory(trace, batch).drop_duplicates(["phase", "device"])) <= 16
    tick = (lambda d: f"GPU {d}") if named else str
    bars = _bars(fig)
    assert bars == {(p, tick(d), c): n for (p, d, c), n in _samples(trace, shown).items()}
    (totals,) = [t for t in fig.data if t.name == "total"]
    sums = defaultdict(int)
    for (p, d, c), n in _samples(trace, shown).items():
        sums[(p, tick(d))] += n
    drawn = dict(zip(zip(*totals.x), totals.y))
    assert {k: v for k, v in drawn.items() if v} == dict(sums)
    assert len(drawn) == len({m.phase for m in trace.memory if m.batch == shown}) * gpus  # every slot, empty ones too
    assert f"batch {shown}" in fig.layout.title.text


@pytest.mark.parametrize("gpus", [2, 3, 8, 16])
def test_device_zero_is_the_tallest(gpus):
    for train in (False, True):
        trace = recorded(gpus=gpus, train=train)
        table = prepare_memory(trace)
        slots = table.drop_duplicates(["phase", "device"])
        assert slots.loc[slots["total"].idxmax(), "device"] == 0
        assert memory_figure(trace).layout.title.text.endswith("GPU 0 carries the most")


def test_caption_says_why_device_zero_carries_more():
    fig = memory_figure(recorded(gpus=3, train=True))
    (caption,) = [a.text for a in fig.layout.annotations]
    assert "After backward, GPU 0 holds 1.23 KiB: 2.8× the 456 B of GPU 1." in caption
    assert "Only GPU 0 holds: parameters · gradients · optimizer state · output and loss." in caption
    assert "batch and chunks (the whole batch, not one chunk)" in caption
    forward = [a.text for a in memory_figure(recorded(gpus=3)).layout.annotations][0]
    assert "After gather" in forward and "gradients" not in forward  # forward only: no gradients anywhere


def test_label_follows_the_memory_kind():
    computed = memory_figure(recorded(gpus=3, train=True))
    assert "computed from tensor sizes (simulated devices)" in computed.layout.title.subtitle.text
    assert "memory_allocated" not in computed.to_json()
    assert {t.name for t in computed.data if t.type == "bar"} <= set(CATEGORIES)
    assert all(t.marker.color == MEMORY_COLORS[t.name] for t in computed.data if t.type == "bar")
    measured = memory_figure(_measured(recorded(gpus=3, train=True)))
    assert "measured: torch.cuda.memory_allocated" in measured.layout.title.subtitle.text
    assert "computed" not in measured.layout.title.subtitle.text and "simulated" not in measured.to_json().lower()
    (bar,) = [t for t in measured.data if t.type == "bar"]  # plain bars, one per device and phase
    assert list(bar.marker.color) == [device_color(int(t[-1])) for t in bar.x[1]]
    assert max(bar.y) == 1260 + 512 and list(bar.x[1]).index("0") == int(np.argmax(bar.y)) % 3


def test_units_are_human():
    fig = memory_figure(recorded(gpus=3, train=True))
    assert list(fig.layout.yaxis.ticktext)[:3] == ["0 KiB", "0.5 KiB", "1 KiB"]
    assert fig.layout.yaxis.tickvals[2] == 1024
    (totals,) = [t for t in fig.data if t.name == "total"]
    assert "1.23 KiB" in totals.text and "200 B" in totals.text and not any("1260" in t for t in totals.text)
    assert [human_bytes(n) for n in (0, 1000, 1024, 1536, 3 * 2**20, 2**30)] == [
        "0 B", "1,000 B", "1.00 KiB", "1.50 KiB", "3.00 MiB", "1.00 GiB"]


def test_batch_must_be_a_sampled_one():
    trace = recorded(gpus=3, train=True)
    with pytest.raises(ValueError, match="memory was sampled for batches 0 and 3 only, got 1"):
        memory_figure(trace, 1)
    with pytest.raises(ValueError, match="no memory samples"):
        memory_figure(dataclasses.replace(trace, memory=[]))


def test_sixteen_devices_stay_small():
    fig = memory_figure(recorded(gpus=16, train=True), 3)
    assert count_marks(fig) <= MAX_MARKS and len(fig.to_json()) < MAX_JSON_BYTES
    assert fig.layout.xaxis.title.text.endswith("(0, 1, 2, …)")

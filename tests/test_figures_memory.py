"""Memory view: bars are the trace's memory samples, grouped by phase, device 0 the tallest, labelled by kind."""
import dataclasses
import re
from collections import defaultdict

import numpy as np
import pytest

from dpviz.figures import MAX_MARKS, count_marks, memory_figure, prepare_memory
from dpviz.engines.dp.vocabulary import VOCABULARY
from dpviz.figures.colors import device_color
from dpviz.figures.memory import PLOT_PX, byte_unit
from dpviz.engines.dp.memory import CATEGORIES
from dpviz.wording import human_bytes
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
    assert "After backward, GPU 0 holds 1.23 KiB: 2.8× the 0.45 KiB of GPU 1." in caption  # the figure's unit
    assert "Only GPU 0 holds: parameters · gradients · optimizer state · output and loss." in caption
    assert "batch and chunks (the whole batch, not one chunk)" in caption
    forward = [a.text for a in memory_figure(recorded(gpus=3)).layout.annotations][0]
    assert "After gather" in forward and "gradients" not in forward  # forward only: no gradients anywhere


def test_label_follows_the_memory_kind():
    computed = memory_figure(recorded(gpus=3, train=True))
    assert "computed from tensor sizes (simulated devices)" in computed.layout.title.subtitle.text
    assert "memory_allocated" not in computed.to_json()
    assert {t.name for t in computed.data if t.type == "bar"} <= set(CATEGORIES)
    assert all(t.marker.color == VOCABULARY.memory_kind(t.name).color for t in computed.data if t.type == "bar")
    measured = memory_figure(_measured(recorded(gpus=3, train=True)))
    assert "measured: torch.cuda.memory_allocated" in measured.layout.title.subtitle.text
    assert "computed" not in measured.layout.title.subtitle.text and "simulated" not in measured.to_json().lower()
    (bar,) = [t for t in measured.data if t.type == "bar"]  # plain bars, one per device and phase
    assert list(bar.marker.color) == [device_color(int(t[-1])) for t in bar.x[1]]
    assert max(bar.y) == 1260 + 512 and list(bar.x[1]).index("0") == int(np.argmax(bar.y)) % 3


def _written_totals(fig):
    """{(phase, device tick): text} of the totals written on top of the bars."""
    out = {}
    for t in fig.data:
        if t.type == "bar":
            for phase, tick, text in zip(*t.x, t.text):
                if text:
                    assert (phase, tick) not in out, "one total per bar"
                    out[(phase, tick)] = text
    return out


def _amounts(fig):
    """Every amount of bytes the figure writes with a unit: hovers and the caption."""
    texts = [str(v) for t in fig.data for row in np.asarray(t.customdata) for v in row[2:]]
    texts += [a.text for a in fig.layout.annotations]
    return re.findall(r"[<\d.,]+ (?:B|KiB|MiB|GiB)\b", " ".join(texts))


@pytest.mark.parametrize("gpus,train,unit", [(3, True, "KiB"), (8, False, "B"), (8, True, "KiB"), (16, True, "KiB")])
def test_one_unit_for_axis_totals_hovers_and_caption(gpus, train, unit):
    fig = memory_figure(recorded(gpus=gpus, train=train))
    assert fig.layout.yaxis.title.text == f"memory on the device ({unit})"
    assert all(re.fullmatch(r"[\d.,]+", t) for t in fig.layout.yaxis.ticktext)  # numbers: the title names the unit
    assert all(re.fullmatch(r"[\d.,]+", t) for t in _written_totals(fig).values())
    amounts = _amounts(fig)
    assert amounts and all(a.endswith(" " + unit) for a in amounts)


def test_units_are_human():
    fig = memory_figure(recorded(gpus=3, train=True))
    assert list(fig.layout.yaxis.ticktext)[:3] == ["0", "0.5", "1"]
    assert fig.layout.yaxis.tickvals[2] == 1024
    written = _written_totals(fig)
    assert written[("backward", "0")] == "1.23" and written[("scatter", "1")] == "0.20"  # 1,260 B and 200 B
    assert [human_bytes(n) for n in (0, 1000, 1024, 1536, 3 * 2**20, 2**30)] == [
        "0 B", "1,000 B", "1.00 KiB", "1.50 KiB", "3.00 MiB", "1.00 GiB"]


def test_the_unit_is_the_one_the_tallest_bar_fills():
    assert [(u.name, u.decimals) for u in map(byte_unit, (920, 1023, 1024, 1260, 45 * 2**10, 450 * 2**10, 3 * 2**30))] == [
        ("B", 0), ("B", 0), ("KiB", 2), ("KiB", 2), ("KiB", 1), ("KiB", 0), ("GiB", 2)]
    kib = byte_unit(1260)
    assert [kib.number(n) for n in (0, 3, 80, 1260)] == ["0.00", "<0.01", "0.08", "1.23"]
    assert kib.amount(1260) == "1.23 KiB" and byte_unit(920).amount(920) == "920 B"


def _slot_px(fig):
    return PLOT_PX / len(_bars_per_slot(fig))


def _bars_per_slot(fig):
    (totals,) = [t for t in fig.data if t.name == "total"]
    return list(zip(*totals.x))


@pytest.mark.parametrize("gpus,train", [(2, False), (2, True), (3, True), (8, False), (8, True)])
def test_every_total_is_written_where_it_does_not_overlap_its_neighbours(gpus, train):
    trace = recorded(gpus=gpus, train=train)
    fig = memory_figure(trace)
    table = prepare_memory(trace).drop_duplicates(["phase", "device"])
    unit = byte_unit(table["total"].max())
    written = _written_totals(fig)
    tick = {d: f"GPU {d}" if len(table) <= 16 else str(d) for d in table["device"]}
    expected = {(p, tick[d]): unit.number(n) for p, d, n in zip(table["phase"], table["device"], table["total"]) if n}
    assert written == expected  # every bar that holds anything, and nothing lost to overlap
    (angle,) = {t.textangle for t in fig.data if t.type == "bar"}
    slot = _slot_px(fig)
    if angle == 0:  # level: the widest number (digits about 8 px at 13 px) fits in a bar's slot
        assert max(map(len, written.values())) * 8 < slot
    else:  # upright: a line of 11 px text (digits about 8 px tall) fits in a bar's slot
        assert angle == -90 and 10 <= slot
        assert {t.outsidetextfont.size for t in fig.data if t.type == "bar"} == {11}
    assert (angle == 0) == (gpus == 2)  # 8 or 16 bars level at 2 GPUs; from 12 bars on, upright
    assert all(t.textposition == "outside" and t.constraintext == "none" for t in fig.data if t.type == "bar")
    assert fig.layout.yaxis.range[1] >= table["total"].max() * (1.25 if angle else 1.12)  # room above for the number


def test_too_many_bars_write_device_zeros_totals_and_say_so():
    trace = recorded(gpus=16, train=True)
    fig = memory_figure(trace)
    written = _written_totals(fig)
    assert {tick for _, tick in written} == {"0"}  # 128 bars: 5 px each, no room for a number on every one
    assert len(written) == len({m.phase for m in trace.memory if m.batch == 0})
    assert "GPU 0's are written, every bar's is in its hover" in fig.layout.title.subtitle.text
    (totals,) = [t for t in fig.data if t.name == "total"]
    assert len(totals.customdata) == len(_bars_per_slot(fig)) and all(c[2].endswith(" in all") for c in totals.customdata)
    assert "every bar's is in its hover" not in memory_figure(recorded(gpus=8, train=True)).layout.title.subtitle.text


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

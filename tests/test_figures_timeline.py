"""Timeline: DataParallel's steps in order above, the measured times below, one lane per device in each;
batch bands at each batch's real extent, outliers cut and marked, a typical batch past the detail bound."""
import dataclasses
import math
import os
import re

import numpy as np

import pytest

from dpviz.figures.sizes import NARROWEST_PX, TICK_SIZE
from dpviz.figures.text_fit import text_px, unwrap

from dpviz import RunConfig
from dpviz.figures import MAX_MARKS, count_marks, prepare_timeline, timeline_figure, timeline_window
from dpviz.figures.timeline import (LEFT_PX, NARROW_CHART_PX, PRESENTING, PRESENTING_CHART_PX, RIGHT_PX, name_slots,
                                   timeline_details)
from dpviz.figures.colors import device_color, device_pattern
from dpviz.figures.timeline_look import LEGEND_TITLE
from dpviz.figures.timeline_measured import MIN_SHARE, measured_scale
from dpviz.figures.timeline_steps import STEP_SLOTS, prepare_steps, step_batches
from dpviz.figures.bounds import DETAIL_BATCHES
from dpviz.figures.timeline_summary import prepare_typical_batch
from figure_traces import LARGEST, LARGEST_TRAINING, MAX_JSON_BYTES, as_cuda, recorded, synthetic

STEPS, MEASURED = "x", "x2"  # each panel's x axis in a figure with both
ORDER = ["scatter", "replicate", "forward", "gather", "loss", "backward", "reduce", "step"]


def _panel(fig, axis, legendgroup):
    """The bars of one phase (legend group) drawn in one panel."""
    (trace,) = [t for t in fig.data if t.xaxis == axis and t.legendgroup == legendgroup and t.type == "bar"
                and t.showlegend is False]
    return trace


def _notes(fig):
    return " ".join(unwrap(a.text) for a in fig.layout.annotations if a.name == "notes").replace("<br>", " ")


def _details(fig):
    return timeline_details(fig) or ""


def _forwards(fig, device):
    """(drawn start, drawn length, measured start, measured duration, batch) of `device`'s measured forwards."""
    bar = _panel(fig, MEASURED, "forward")
    on = np.asarray(bar.y) == device
    data = np.asarray(bar.customdata)[on]
    return (np.asarray(bar.base, dtype=float)[on], np.asarray(bar.x, dtype=float)[on], data[:, 3].astype(float), data[:, 4].astype(float),
            data[:, 0].astype(int))


def _with_outlier(trace, phase, batch, lane, ms):
    """The trace with one span of `phase` lasting `ms` milliseconds and everything after it shifted."""
    (slow,) = [s for s in trace.spans_of(batch, phase) if s.lane == lane]
    extra = ms / 1e3 - slow.duration
    spans = [dataclasses.replace(s, end=s.end + extra) if s is slow
             else dataclasses.replace(s, start=s.start + extra, end=s.end + extra) if s.start >= slow.end
             else dataclasses.replace(s, end=s.end + extra) if s.start <= slow.start and s.end >= slow.end and s.lane is None
             else s for s in trace.spans]  # an envelope around it (apply) grows; what ran beside it does not
    return dataclasses.replace(trace, spans=spans)


# Two panels, one lane per device in each.

@pytest.mark.parametrize("gpus,train", [(8, False), (16, True)])
def test_one_lane_per_device_in_each_panel(gpus, train):
    fig = timeline_figure(recorded(gpus=gpus, train=train))
    for axis in (fig.layout.yaxis, fig.layout.yaxis2):
        assert list(axis.tickvals) == list(range(gpus))
        assert [t.rsplit("</span> ", 1)[-1] for t in axis.ticktext] == [f"GPU {d}" for d in range(gpus)]
        assert all(f"color:{device_color(d)}" in t for d, t in zip(range(gpus), axis.ticktext))  # the lane's swatch
    for axis in (STEPS, MEASURED):
        lanes = set()
        for t in fig.data:
            if t.xaxis == axis and t.type == "bar":
                lanes |= set(np.asarray(t.y).tolist())
        assert lanes == set(range(gpus))
    assert fig.layout.xaxis2.title.text.startswith("time since the run began (ms")  # as DDP's timeline says it
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]  # steps above, measured below


def test_show_draws_one_panel_or_both():
    trace = recorded(gpus=3)
    steps, measured = timeline_figure(trace, show="steps"), timeline_figure(trace, show="measured")
    assert {t.xaxis for t in steps.data if t.showlegend is False} == {"x"}
    assert {t.xaxis for t in measured.data if t.showlegend is False} == {"x"}
    assert [a.name for a in steps.layout.annotations if a.name and a.name.endswith("panel")] == ["steps panel"]
    assert measured.layout.xaxis.title.text.startswith("time since the run began (ms")
    with pytest.raises(ValueError, match="show must be one of both, steps, measured"):
        timeline_figure(trace, show="gantt")


# The step panel: DataParallel's order, no measured time.

@pytest.mark.parametrize("gpus", [3, 8])
def test_step_layout_follows_dataparallels_order_with_the_replicas_side_by_side(gpus):
    trace = recorded(gpus=gpus, train=True)
    bars, slots = prepare_steps(trace, [0, 3])
    for batch in (0, 3):
        placed = bars[(bars["batch"] == batch) & (bars["phase"] != "idle")]
        starts = placed.groupby("phase")["x0"].agg(["min", "max"])
        assert (starts["min"] == starts["max"]).all()  # every lane's bar of a step in the same slot: side by side
        order = starts["min"].sort_values().index.tolist()
        assert order == ORDER
        for phase in ("forward", "backward"):  # one bar per replica, on its own lane
            lanes = placed[placed["phase"] == phase]["device"].tolist()
            assert sorted(lanes) == [s.lane for s in trace.replicas(batch)]
        for phase in ("loss", "reduce", "step"):
            assert placed[placed["phase"] == phase]["device"].tolist() == [0]
    assert slots[slots["batch"] == 0]["phase"].tolist() == ORDER
    assert bars[bars["batch"] == 3]["x0"].min() > bars[bars["batch"] == 0]["x1"].max()  # batch after batch
    fig = timeline_figure(trace)
    names = list(fig.layout.xaxis.ticktext)
    assert names[: len(ORDER)] == [trace.vocabulary.phase(p).label.split(" (")[0] for p in ORDER]


def test_step_bars_are_as_long_as_their_share_of_rows():
    trace = recorded(gpus=8)  # 30, 30, 30, 10 rows: chunks of 4 (the last replica 2), then five of 2
    bars, _ = prepare_steps(trace, [0, 3])
    forwards = bars[bars["phase"] == "forward"]
    length = forwards["x1"] - forwards["x0"]
    rows = forwards["rows"].to_numpy()
    assert sorted(set(rows.tolist())) == [2, 4]
    assert np.allclose(length / length.max(), rows / rows.max())
    scatter = bars[bars["phase"] == "scatter"]
    assert np.allclose(scatter["x1"] - scatter["x0"], length.max())  # a host copy fills its slot
    idle = bars[bars["phase"] == "idle"]
    assert sorted(idle["device"].tolist()) == [5, 6, 7] and set(idle["batch"]) == {3}


def test_step_panel_shows_a_few_batches_and_the_short_last_one():
    inference, training = recorded(gpus=8), recorded(gpus=8, train=True)
    assert step_batches(inference, 0, 3) == [0, 1, 2, 3]
    assert step_batches(training, 0, 3) == [0, 3]  # eight slots a batch: one, and the last split differently
    long = synthetic(RunConfig(data_size=4500, gpus=8))  # 150 batches of 30: every split the same
    assert step_batches(long, 0, 149) == list(range(STEP_SLOTS // 4))
    fig = timeline_figure(long)
    assert "The 147 batches not drawn there repeat the same steps" in _notes(fig)
    labels = [a.text for a in fig.layout.annotations if a.yref == "y domain" and a.text.startswith("batch")]
    assert labels == ["batch 1", "batch 2", "batch 3"]  # counted from 1


# The measured panel: real times, batch bands, cuts.

def test_forward_bars_hover_their_measured_times_and_sit_where_the_scale_puts_them():
    trace = recorded(gpus=3)
    fig = timeline_figure(trace)
    table = prepare_timeline(trace, 0, 3)
    scale = measured_scale(table)
    for device in range(3):
        base, drawn, start, took, batches = _forwards(fig, device)
        spans = sorted((s for s in trace.spans if s.phase == "forward" and s.lane == device), key=lambda s: s.batch)
        assert batches.tolist() == [s.batch for s in spans]
        assert np.allclose(start, [s.start * 1e3 for s in spans])  # the hover's start and duration: as measured
        assert np.allclose(took, [s.duration * 1e3 for s in spans])
        assert np.allclose(base, scale(start))
        shortest = MIN_SHARE * (scale(table["end_ms"].max()) - scale(table["start_ms"].min()))
        assert np.allclose(drawn, np.maximum(scale(start + took) - base, shortest))


@pytest.mark.parametrize("gpus,train", [(8, False), (8, True), (16, True)])
def test_batch_bands_span_each_batchs_real_start_and_end(gpus, train):
    trace = recorded(gpus=gpus, train=train)
    fig = timeline_figure(trace)
    scale = measured_scale(prepare_timeline(trace, 0, len(trace.batches) - 1))
    bands = {s.name: s for s in fig.layout.shapes if s.xref == MEASURED and s.type == "rect" and s.name.startswith("batch")}
    assert sorted(bands) == [f"batch {b}" for b in range(len(trace.batches))]
    for batch in trace.batches:
        spans = trace.spans_of(batch.index)
        start, end = min(s.start for s in spans) * 1e3, max(s.end for s in spans) * 1e3
        band = bands[f"batch {batch.index}"]
        assert np.isclose(band.x0, scale(start)) and np.isclose(band.x1, scale(end))
        assert band.y0 == 0 and band.y1 == 1 and band.yref == "y2 domain"  # over every lane
        lines = [s for s in fig.layout.shapes if s.name == f"batch {batch.index} starts" and s.xref == MEASURED]
        assert len(lines) == 1 and np.isclose(lines[0].x0, scale(start))
    previous = None
    for batch in trace.batches:  # one ends before the next begins
        band = bands[f"batch {batch.index}"]
        assert previous is None or band.x0 >= previous - 1e-9
        previous = band.x1
    labels = [a.text for a in fig.layout.annotations if a.xref == MEASURED and a.name and a.name.startswith("batch")]
    assert labels and all(t.split()[-1].isdigit() for t in labels)
    assert len({t.startswith("batch ") for t in labels}) == 1  # one form: all "batch N" or all bare N


def test_an_outlier_is_cut_marked_and_hovers_its_measured_time():
    plain = synthetic(RunConfig(data_size=120, gpus=4))  # 4 batches, every span a few microseconds
    slow = _with_outlier(_with_outlier(plain, "forward", 1, 2, 10.0), "replicate", 2, None, 4.0)
    fig = timeline_figure(slow)
    table = prepare_timeline(slow, 0, 3)
    scale = measured_scale(table)
    assert len(scale.cuts) >= 2
    drawn_window = scale(table["end_ms"].max()) - scale(table["start_ms"].min())
    assert drawn_window < (table["end_ms"].max() - table["start_ms"].min()) / 20  # 14 ms of outliers no longer set it
    bar = _panel(fig, MEASURED, "forward")
    data = np.asarray(bar.customdata)
    (i,) = np.flatnonzero((data[:, 0].astype(int) == 1) & (np.asarray(bar.y) == 2))
    assert np.isclose(float(data[i, 4]), 10.0)  # the hover: measured
    assert bar.x[i] < 1.0 and "a cut (//) crosses it" in data[i, 5]  # drawn short, and says why
    assert sum("crosses it" in str(note) for note in data[:, 5]) == 1  # the other forwards: as measured
    # Each cut marked once, on the time axis: a // and a hover there, nothing drawn across the lanes.
    marks = [a for a in fig.layout.annotations if a.name == "cut"]
    assert 1 <= len(marks) <= len(scale.cuts) and {a.text for a in marks} == {"//"}
    assert all(a.yref == "y2 domain" and a.y == 0 for a in marks)
    window = scale.drawn[-1] - scale.drawn[0]
    assert (np.diff(sorted(a.x for a in marks)) >= 0.05 * window - 1e-9).all()  # never two marks in one place
    assert not [s for s in fig.layout.shapes if s.name == "cut"]
    (hover,) = [t for t in fig.data if t.name == "cut"]
    assert list(hover.y) == [3.5] * len(scale.cuts) and hover.cliponaxis is False  # the lanes' bottom edge: the axis
    assert any(bar.base[i] <= m <= bar.base[i] + bar.x[i] for m in hover.x)  # the mark under the bar it shortens
    assert np.allclose(sorted(np.asarray(hover.customdata)[:, 1]), sorted(c.end - c.start for c in scale.cuts))
    assert "a quiet moment, drawn shorter than it lasted" in _notes(fig)
    assert "so one slow moment does not set the scale" in _details(fig)
    assert "//: a quiet moment cut short" in fig.layout.xaxis2.title.text
    # Without the outliers nothing is cut: the drawn axis is measured time.
    plain_fig = timeline_figure(plain)
    assert not [a for a in plain_fig.layout.annotations if a.name == "cut"] and "quiet moment" not in _notes(plain_fig)
    base, _, start, _, _ = _forwards(plain_fig, 1)
    assert np.allclose(base, start)


def test_ticks_give_measured_times_outside_the_cuts():
    slow = _with_outlier(synthetic(RunConfig(data_size=120, gpus=4)), "forward", 1, 2, 10.0)
    fig = timeline_figure(slow)
    scale = measured_scale(prepare_timeline(slow, 0, 3))
    values, texts = fig.layout.xaxis2.tickvals, fig.layout.xaxis2.ticktext
    assert len(values) >= 3
    width = scale.drawn[-1] - scale.drawn[0]
    for at, text in zip(values, texts):
        t = float(text.replace(",", ""))  # a label is the measured time, to the digits it shows
        assert abs(scale(t) - at) < width / 100
        assert not any(c.start + 0.01 < t < c.end - 0.01 for c in scale.cuts)
    assert (np.diff(values) >= width / 10 - 1e-9).all()  # apart, though a cut brings far times together


@pytest.mark.parametrize("gpus,train", [(8, False), (16, True)])
def test_short_spans_are_drawn_wide_enough_to_see(gpus, train):
    trace = recorded(gpus=gpus, train=train)
    fig = timeline_figure(trace)
    table = prepare_timeline(trace, 0, len(trace.batches) - 1)
    scale = measured_scale(table)
    shortest = MIN_SHARE * (scale(table["end_ms"].max()) - scale(table["start_ms"].min()))
    widened = 0
    for bar in (t for t in fig.data if t.type == "bar" and t.xaxis == MEASURED and t.showlegend is False):
        drawn = np.asarray(bar.x, dtype=float)
        data = np.asarray(bar.customdata)
        start, took = data[:, 3].astype(float), data[:, 4].astype(float)
        assert (drawn >= shortest - 1e-9).all()
        assert np.allclose(drawn, np.maximum(scale(start + took) - scale(start), shortest))
        assert "took %{customdata[4]:.3f} ms" in bar.hovertemplate
        if bar.legendgroup != "idle":
            widened += int((scale(start + took) - scale(start) < shortest).sum())
    said = f"Bars shorter than {shortest:.3g} ms are drawn that long" in timeline_details(fig)
    assert said == (widened > 0) == ("drawn a little wider so they show" in _notes(fig))


# Many batches: one typical batch.

def test_summary_kicks_in_past_the_detail_bound():
    trace = synthetic(RunConfig(data_size=30 * (DETAIL_BATCHES + 1), gpus=4))
    detailed = timeline_figure(trace, batches=DETAIL_BATCHES)
    assert len(_panel(detailed, MEASURED, "forward").y) == DETAIL_BATCHES * 4  # one bar per batch and replica
    assert "typical" not in _notes(detailed)
    summary = timeline_figure(trace)
    forward = _panel(summary, MEASURED, "forward")
    assert sorted(np.asarray(forward.y).tolist()) == [0, 1, 2, 3]  # one bar per lane, not per batch
    assert f"{DETAIL_BATCHES + 1} batches are too many to draw one by one" in _notes(summary)
    assert summary.layout.xaxis2.title.text.startswith("ms since its batch began (median of")
    # Each bar: the median start and end of that lane's forward, measured from its own batch's start (numpy the oracle).
    since = {}
    for batch in trace.batches:
        begin = min(s.start for s in trace.spans_of(batch.index))
        for s in trace.replicas(batch.index):
            since.setdefault(s.lane, []).append(((s.start - begin) * 1e3, (s.end - begin) * 1e3))
    for lane, base, length in zip(forward.y, forward.base, forward.x):
        starts, ends = np.array(since[lane]).T
        assert np.isclose(base, np.median(starts)) and np.isclose(base + length, np.median(ends))
    assert timeline_figure(trace, batches=DETAIL_BATCHES, detail=False).layout.xaxis2.title.text.startswith("ms since its batch")


def test_typical_batch_keeps_idle_lanes_idle_in_most_batches():
    trace = recorded(gpus=16, train=True)  # 30 rows in 15 chunks of 2: GPU 15 never gets a row
    typical = prepare_typical_batch(prepare_timeline(trace, 0, 3))
    idle = typical[typical["phase"] == "idle"]
    assert idle["device"].tolist() == [15]  # GPUs 5-14, idle in 1 batch of 4, are not
    assert typical[(typical["phase"] == "forward")]["batches"].max() == 4


# Legend, colours, notes.

@pytest.mark.parametrize("gpus,train", [(2, False), (8, True), (16, True)])
def test_legend_entries_match_the_colours_drawn(gpus, train):
    trace = recorded(gpus=gpus, train=train)
    fig = timeline_figure(trace)
    entries = [t for t in fig.data if t.showlegend]
    groups = [t.legendgroup for t in entries]
    assert len(groups) == len(set(groups))
    drawn = {t.legendgroup for t in fig.data if t.showlegend is False and t.type == "bar"}
    assert drawn <= set(groups)  # everything drawn has its entry
    assert fig.layout.legend.title.text == LEGEND_TITLE
    for entry in entries:
        bars = [t for t in fig.data if t.showlegend is False and t.legendgroup == entry.legendgroup and t.type == "bar"]
        if entry.legendgroup == "cut":
            assert any(s.name == "cut" and s.line.dash == entry.line.dash for s in fig.layout.shapes)
            continue
        assert bars, entry.name
        if entry.marker.color == "rgba(0,0,0,0)":  # an open swatch: each bar in its lane's GPU colour
            for bar in bars:
                assert list(bar.marker.color) == [device_color(d) for d in bar.y]
            assert (entry.marker.pattern.shape or "") == trace.vocabulary.phase(entry.legendgroup).hatch
        else:  # a filled swatch: every bar in exactly that colour
            assert all(bar.marker.color == entry.marker.color for bar in bars)
            if entry.legendgroup != "idle":
                assert entry.marker.color == trace.vocabulary.phase(entry.legendgroup).color
    assert [t.name for t in entries if t.legendgroup == "forward"] == ["forward"]


def test_gpus_8_to_15_are_hatched_in_both_panels():
    fig = timeline_figure(recorded(gpus=16, train=True))
    for axis in (STEPS, MEASURED):
        bar = _panel(fig, axis, "forward")
        assert list(bar.marker.pattern.shape) == [device_pattern(d) for d in bar.y]
        assert {d for d, p in zip(bar.y, bar.marker.pattern.shape) if p} == set(range(8, 15))
    assert "◆" in fig.layout.yaxis.ticktext[8] and "■" in fig.layout.yaxis.ticktext[7]


def test_times_note_says_what_simulated_and_real_times_mean():
    simulated = _notes(timeline_figure(recorded(gpus=3, train=True)))
    assert "take turns" in simulated and "On real GPUs they overlap" in simulated
    # On fewer cores than devices the replicas shared threads, one per core, and the note counts them.
    shared = dataclasses.replace(recorded(gpus=3, train=True), facts={"threads": "reused", "threads_at_once": 2})
    assert "replicas take turns on 2 CPU threads, one per core" in _notes(timeline_figure(shared))
    assert "The 3 replicas took turns on 2 threads" in _details(timeline_figure(shared))
    one_each = dataclasses.replace(shared, facts={"threads": "reused", "threads_at_once": 3})
    assert "each GPU is a CPU thread" in _notes(timeline_figure(one_each))
    assert "backwards take turns here too" in simulated
    assert "backwards" not in _notes(timeline_figure(recorded(gpus=3)))
    # The why, for whoever asks: behind the page's expander, not in the chart's first lines.
    details = _details(timeline_figure(recorded(gpus=3, train=True)))
    assert "interpreter lock" in details and "one after another on the CPU autograd thread" in details
    # Threads reused from call to call (the trace says so): the cost of starting them is named as left out.
    assert recorded(gpus=3).facts["threads"] == "reused"
    assert "starts and joins a new thread per replica on every call" in details
    assert recorded(gpus=3).facts["threads_at_once"] == min(3, len(os.sched_getaffinity(0)))
    unsaid = dataclasses.replace(recorded(gpus=3, train=True), facts={})
    assert "starts and joins" not in _details(timeline_figure(unsaid))
    real = timeline_figure(as_cuda(recorded(gpus=3, train=True)))
    assert "torch.cuda.synchronize" in _details(real) and "taking turns" not in _notes(real) + _details(real)
    assert "autograd" not in _notes(real) + _details(real)
    alone = _notes(timeline_figure(recorded(gpus=1, train=True)))
    assert "no replicate, no gather" in alone and "staircase" not in alone


@pytest.mark.parametrize("gpus,train", [(8, True), (16, True), (2, False)])
def test_the_measured_note_is_a_few_lines_in_a_students_words(gpus, train):
    fig = timeline_figure(_with_outlier(recorded(gpus=gpus, train=train), "forward", 1, 1, 10.0))
    (notes,) = [a for a in fig.layout.annotations if a.name == "notes"]
    lines = re.split(r"<br\s*/?>", notes.text)
    first = " ".join(lines[:6])
    for jargon in ("interpreter lock", "75th percentile", "span lengths", "percentile", "GIL"):
        assert jargon not in first and jargon not in unwrap(notes.text), jargon
    assert len(lines) <= 12  # at the narrowest chart, where the lines are shortest
    assert "75th percentile of span lengths" in _details(fig)  # the rule, with its numbers, for whoever asks
    assert timeline_details(timeline_figure(recorded(gpus=2)))
    ddp = timeline_details(timeline_figure(__import__("ddp_traces").ddp_trace("two_train")))
    assert "share the machine's CPU cores" in ddp  # DDP's: why its times include waiting, under the chart


def test_notes_and_legend_sit_outside_the_title_and_the_panels():
    fig = timeline_figure(recorded(gpus=16, train=True))
    height, top = fig.layout.height, fig.layout.margin.t
    plot = height - top - fig.layout.margin.b
    legend_bottom_px = top - (fig.layout.legend.y - 1) * plot  # from the figure's top
    subtitle_lines = fig.layout.title.subtitle.text.count("<br>") + 1
    assert legend_bottom_px < top and fig.layout.legend.y > 1
    assert fig.layout.title.y * height > height - 40  # the title in the top 40 px
    assert top - (top - legend_bottom_px) > 46 + 19 * subtitle_lines  # legend rows below the subtitle
    notes = [a for a in fig.layout.annotations if a.name == "notes"]
    assert len(notes) == 1 and notes[0].yanchor == "top" and notes[0].yshift < 0
    # every line fits the narrowest chart at the notes' size (style.wrap's own measure)
    assert max(text_px(line, 14) for line in re.split(r"<br\s*/?>", notes[0].text)) <= NARROWEST_PX
    for a in fig.layout.annotations:  # text off the marks inherits the page's colour (dark theme)
        assert a.font.color is None


def test_title_says_all_batches_and_simulated_once():
    fig = timeline_figure(recorded(gpus=2))
    assert fig.layout.title.text == "Timeline of all 4 batches, one lane per GPU"
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1


# Bounds.

def test_largest_run_shows_a_window_under_the_bound():
    trace = synthetic(LARGEST)
    size = timeline_window(trace)
    assert size == MAX_MARKS // (4 * 16)
    fig = timeline_figure(trace)
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES
    assert fig.layout.title.text == f"Timeline of batches 1-{size:,} of 10,000"  # counted from 1
    assert "first_batch" in fig.layout.title.subtitle.text
    later = timeline_figure(trace, first_batch=9_990)
    assert "batches 9,991-10,000 of 10,000" in later.layout.title.text
    typical = np.asarray(_panel(later, MEASURED, "forward").customdata)
    assert typical[:, 0].astype(int).tolist() == [10] * 15  # each lane's typical forward: of the window's 10 batches


def test_largest_training_run_keeps_the_bound_even_drawn_in_detail():
    trace = synthetic(LARGEST_TRAINING)
    size = timeline_window(trace)
    assert size == MAX_MARKS // (5 * 16 + 3)
    for first in (0, len(trace.batches) - size):
        for detail in (None, True):
            fig = timeline_figure(trace, first_batch=first, detail=detail)
            assert count_marks(fig) <= MAX_MARKS + 200  # the step panel's few bars and the legend on top
            assert len(fig.to_json()) < MAX_JSON_BYTES
    backs = _panel(fig, MEASURED, "backward")
    assert len(np.asarray(backs.y)) == size * 15  # 30 rows on 16 GPUs: 15 chunks of 2 per batch


def test_bad_window_is_a_clear_error():
    trace = recorded(gpus=8)
    with pytest.raises(ValueError, match="batch must be between 0 and 3"):
        timeline_figure(trace, first_batch=4)
    with pytest.raises(ValueError, match="batches must be between 1 and"):
        timeline_figure(trace, batches=0)


# The table the panels are drawn from.

def test_host_phases_drawn_on_every_device_they_involve():
    trace = recorded(gpus=8)
    table = prepare_timeline(trace, 0, 3)
    for phase in ("scatter", "replicate", "gather"):
        part = table[table["phase"] == phase]
        assert part.groupby("batch")["device"].apply(sorted).tolist() == [list(range(8))] * 3 + [list(range(5))]
        host = trace.host_spans(3)[phase]
        last = part[part["batch"] == 3]
        assert np.allclose(last["start_ms"], host.start * 1e3) and np.allclose(last["end_ms"], host.end * 1e3)


def test_idle_devices_get_a_grey_band_over_their_batch():
    fig = timeline_figure(recorded(gpus=8))
    idle = _panel(fig, MEASURED, "idle")
    assert sorted(np.asarray(idle.y).tolist()) == [5, 6, 7]
    assert set(np.asarray(idle.customdata)[:, 0].astype(int).tolist()) == {3}


def test_single_device_lane():
    fig = timeline_figure(recorded(gpus=1))
    assert [t.rsplit(" ", 2)[-2:] for t in fig.layout.yaxis2.ticktext] == [["GPU", "0"]]
    assert {t.legendgroup for t in fig.data if t.showlegend} <= {"forward", "scatter", "cut"}


def test_one_backward_bar_per_replica_per_batch_on_its_lane():
    trace = recorded(gpus=3, train=True)
    fig = timeline_figure(trace)
    back = _panel(fig, MEASURED, "backward")
    drawn = sorted(zip(np.asarray(back.customdata)[:, 0].astype(int).tolist(), np.asarray(back.y).tolist()))
    assert drawn == [(b, d) for b in range(4) for d in range(3)]
    spans = {(s.batch, s.lane): s for s in trace.spans if s.phase == "backward"}
    table = prepare_timeline(trace, 0, 3)
    rows = table[table["phase"] == "backward"]
    for r in rows.itertuples():
        s = spans[(r.batch, r.device)]
        assert np.isclose(r.start_ms, s.start * 1e3) and np.isclose(r.end_ms, s.end * 1e3)
        assert (r.rows, r.first_row) == (s.rows, s.row_offset)
    assert rows[rows["batch"] == 3]["rows"].tolist() == [4, 4, 2]
    colors = set(zip(np.asarray(back.y).tolist(), back.marker.color))
    assert colors == {(0, "#0072B2"), (1, "#E69F00"), (2, "#009E73")}  # the devices' own colours
    assert back.marker.pattern.shape == "x"


@pytest.mark.parametrize("gpus", [1, 3, 8])
def test_loss_sum_and_step_sit_on_device_zero_once_per_batch(gpus):
    fig = timeline_figure(recorded(gpus=gpus, train=True))
    groups = {t.legendgroup for t in fig.data if t.showlegend}
    for phase in ("loss", "step") + (("reduce",) if gpus > 1 else ()):
        bar = _panel(fig, MEASURED, phase)
        assert np.asarray(bar.y).tolist() == [0] * 4
        assert np.asarray(bar.customdata)[:, 0].astype(int).tolist() == [0, 1, 2, 3]
    assert (gpus > 1) == ("reduce" in groups)
    hatches = {t.legendgroup: t.marker.pattern.shape for t in fig.data if t.showlegend and t.type == "bar"}
    phase_hatches = [hatches[p] for p in ("backward", "loss", "reduce", "step") if p in hatches]
    assert len(set(phase_hatches)) == len(phase_hatches)  # every training phase looks different


def test_idle_band_covers_the_way_back():
    trace = recorded(gpus=8, train=True)
    table = prepare_timeline(trace, 3, 3)
    idle = table[table["phase"] == "idle"]
    step = [s for s in trace.spans if s.phase == "step" and s.batch == 3][0]
    assert idle["device"].tolist() == [5, 6, 7] and np.allclose(idle["end_ms"], step.end * 1e3)


def test_idle_is_the_split_s_grey_and_a_cut_is_no_state_of_a_lane():
    from dpviz.figures.colors import IDLE_GREY
    from dpviz.figures.timeline_look import IDLE_LABEL

    plain = synthetic(RunConfig(data_size=100, gpus=8))  # the last batch of 10 rows leaves GPUs 5-7 idle
    fig = timeline_figure(_with_outlier(plain, "forward", 1, 2, 10.0))
    idle = [t for t in fig.data if t.type == "bar" and t.legendgroup == "idle"]
    assert idle and all(t.marker.color == IDLE_GREY for t in idle)  # solid, as in Split and Flow
    (idle_entry,) = [t for t in fig.data if t.showlegend and t.name == IDLE_LABEL]
    assert idle_entry.marker.color == IDLE_GREY
    # The cut is a mark on the time axis, named in its title: no legend entry, no line or band across the lanes.
    assert [a.text for a in fig.layout.annotations if a.name == "cut"]
    assert not [t for t in fig.data if t.showlegend and t.legendgroup == "cut"]
    assert not [s for s in fig.layout.shapes if s.name == "cut"]


def test_open_swatches_show_on_both_pages():
    from dpviz.figures.colors import DARK_BACKGROUND, LIGHT_BACKGROUND, contrast_ratio

    fig = timeline_figure(recorded(gpus=8, train=True))
    open_ = [t for t in fig.data if t.showlegend and t.type == "bar" and t.marker.color == "rgba(0,0,0,0)"]
    assert {t.legendgroup for t in open_} >= {"forward", "backward"}
    for entry in open_:  # its edge is all there is of it: 3:1 (WCAG 1.4.11) on white and on the dark page
        assert entry.marker.line.color.startswith("#")  # opaque: no alpha thinning it on the dark page
        assert contrast_ratio(entry.marker.line.color, LIGHT_BACKGROUND) >= 3
        assert contrast_ratio(entry.marker.line.color, DARK_BACKGROUND) >= 3


def test_ticks_are_round_and_written_alike():
    from dpviz.figures.timeline_scale import MIN_GAP_SHARE, time_scale, time_ticks

    # Three busy stretches around two long quiet ones (ms): round times survive in each busy stretch.
    starts = np.array([0.77, 1.0, 1.2, 41.9, 42.0, 42.3, 206.0, 206.2, 206.5])
    scale = time_scale(starts, starts + 0.15, cap=0.75)
    assert len(scale.cuts) == 2
    values, texts = time_ticks(scale, count=8)
    assert len(values) >= 3
    decimals = {len(t.split(".")[1]) if "." in t else 0 for t in texts}
    assert len(decimals) == 1  # "0.8 … 42.0 … 206.5", never "0.768 41.9 206"
    width = scale.drawn[-1] - scale.drawn[0]
    assert (np.diff(values) >= width * MIN_GAP_SHARE - 1e-9).all()
    for at, text in zip(values, texts):
        t = float(text.replace(",", ""))
        assert abs(scale(t) - at) < 1e-9 and not any(c.start < t < c.end for c in scale.cuts)


def test_batch_labels_take_one_form():
    from dpviz.figures.timeline_measured import batch_labels

    wide = batch_labels([(0, 0, 25), (1, 25, 50), (2, 50, 75), (3, 75, 100)], 100)
    assert list(wide.values()) == ["batch 1", "batch 2", "batch 3", "batch 4"]  # counted from 1
    narrow = batch_labels([(0, 0, 40), (1, 40, 80), (2, 80, 92), (3, 92, 100)], 100)  # the last band: 8 %
    assert list(narrow.values()) == ["1", "2", "3", "4"]  # never "batch 1" beside a bare "4"
    assert batch_labels([(0, 0, 99.5), (1, 99.5, 100)], 100)[1] == ""  # no room at all: the hover names it


def test_the_lanes_names_of_both_panels_grow_under_presenting():
    from dpviz.figures.presenting import presentation
    from dpviz.figures.sizes import TICK_SIZE

    fig = timeline_figure(recorded(gpus=8, train=True))
    shown = presentation(fig)
    for axis in ("yaxis", "yaxis2", "xaxis", "xaxis2"):  # the measured panel's too, not the theme's small ticks
        assert fig.layout[axis].tickfont.size == TICK_SIZE
        assert shown.layout[axis].tickfont.size == round(TICK_SIZE * 1.35, 1)


# A name's box tilted t degrees: its length across (cos t) and its line's height (about 1.15 em) up (sin t).
LINE_BOX_EM = 1.15


@pytest.mark.parametrize("gpus, train", [(1, False), (4, False), (4, True), (16, True)])
def test_slot_names_keep_apart_on_the_narrowest_chart_and_presenting(gpus, train):
    """Each slot's name, tilted as drawn, is no wider than its slot on an 800 px window's chart and presenting at
    1024 px (1.35 times the type and the margins): neighbouring names never meet (at -60° they did, 29 times)."""
    fig = timeline_figure(recorded(gpus=gpus, train=train))
    axis = fig.layout.xaxis
    tilt = math.radians(-(axis.tickangle or 0))
    across = axis.range[1] - axis.range[0]
    assert [t for t in axis.ticktext if t] == list(axis.ticktext)  # every slot named: they fit
    for chart, scale in ((NARROW_CHART_PX, 1.0), (PRESENTING_CHART_PX, PRESENTING)):
        slot = (chart - (fig.layout.margin.l + fig.layout.margin.r) * scale) / across
        size = TICK_SIZE * scale
        box = max(text_px(t, size) for t in axis.ticktext) * math.cos(tilt) + LINE_BOX_EM * size * math.sin(tilt)
        assert box <= slot, (chart, box, slot)
    # The room under the steps panel holds the longest name's drop, above the measured panel's title.
    steps, measured = fig.layout.yaxis.domain, fig.layout.yaxis2.domain
    plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    longest = max(text_px(t, TICK_SIZE) for t in axis.ticktext)
    assert (steps[0] - measured[1]) * plot >= longest * math.sin(tilt) + 46


def test_slots_too_narrow_for_upright_names_keep_every_few():
    """Where even upright names would meet, every few slots keep theirs (the bars' hovers name every step)."""
    import plotly.graph_objects as go

    names = ["scatter", "replicate", "forward", "gather"] * 15
    fig = go.Figure(layout=dict(xaxis=dict(range=[0, len(names)], tickvals=list(range(len(names))), ticktext=names)))
    name_slots(fig, "x")
    kept = [i for i, t in enumerate(fig.layout.xaxis.ticktext) if t]
    assert fig.layout.xaxis.tickangle == -90 and 1 < len(kept) < len(names)
    gap = kept[1] - kept[0]
    assert all(b - a == gap for a, b in zip(kept, kept[1:]))
    assert (NARROW_CHART_PX - LEFT_PX - RIGHT_PX) / len(names) * gap >= LINE_BOX_EM * TICK_SIZE  # kept names clear


def test_legend_rows_fit_their_room_on_the_narrowest_chart():
    """Two entries to a row on an 800 px window's chart, as plotly lays them out (an entry: its width, 40 px of
    swatch and gaps, 5 between), and the room kept over the steps panel holds the rows that makes."""
    fig = timeline_figure(recorded(gpus=4, train=True))
    legend, margin = fig.layout.legend, fig.layout.margin
    plot_w = NARROW_CHART_PX - margin.l - margin.r
    step = legend.entrywidth + 40 + 5
    per_row = max(k for k in range(1, 10) if k * step - 5 < plot_w)
    assert per_row >= 2
    entries = [t for t in fig.data if t.showlegend]
    rows = -(-len(entries) // per_row)
    plot = fig.layout.height - margin.t - margin.b
    room = (legend.y - 1) * plot - 46  # from the legend's top to the steps panel's title
    assert room >= rows * 26 + 19  # its rows, and its title's line

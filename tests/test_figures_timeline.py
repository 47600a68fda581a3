"""Timeline: one lane per device, every span at its measured time, idle bands, a window past the bound."""
import numpy as np
import pytest

from dpviz.figures import MAX_MARKS, count_marks, prepare_timeline, timeline_figure, timeline_window
from dpviz.figures.timeline import min_width_ms
from figure_traces import LARGEST, LARGEST_TRAINING, MAX_JSON_BYTES, as_cuda, recorded, synthetic


def _bars(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


def _forwards(fig, device):
    """(start, drawn length, measured duration, batch) of `device`'s forward bars, in batch order."""
    bar = _bars(fig, "forward")
    on = np.asarray(bar.y) == device
    data = np.asarray(bar.customdata, dtype=float)[on]
    return np.asarray(bar.base)[on], np.asarray(bar.x)[on], data[:, 4], data[:, 0].astype(int)


def test_one_lane_per_device():
    fig = timeline_figure(recorded(gpus=8))
    assert list(fig.layout.yaxis.tickvals) == list(range(8))
    assert list(fig.layout.yaxis.ticktext) == [f"GPU {d}" for d in range(8)]
    lanes = set()
    for t in fig.data:
        lanes |= set(np.asarray(t.y).tolist())
    assert lanes == set(range(8))
    assert fig.layout.xaxis.title.text.startswith("time since the run began (ms")


def test_forward_bars_sit_at_their_measured_times():
    trace = recorded(gpus=3)
    fig = timeline_figure(trace)
    shortest = min_width_ms(prepare_timeline(trace, 0, 3))
    for device in range(3):
        start, drawn, took, batches = _forwards(fig, device)
        spans = sorted((s for s in trace.spans if s.phase == "forward" and s.lane == device), key=lambda s: s.batch)
        assert batches.tolist() == [s.batch for s in spans]
        assert np.allclose(start, [s.start * 1e3 for s in spans])
        assert np.allclose(took, [s.duration * 1e3 for s in spans])  # the hover's duration: as measured
        assert np.allclose(drawn, np.maximum(took, shortest))


@pytest.mark.parametrize("gpus,train", [(8, False), (8, True), (16, True)])
def test_short_spans_are_drawn_wide_enough_to_see_and_hover_their_measured_time(gpus, train):
    trace = recorded(gpus=gpus, train=train)
    fig = timeline_figure(trace)
    table = prepare_timeline(trace, 0, len(trace.batches) - 1)
    shortest = min_width_ms(table)
    assert np.isclose(shortest, (table["end_ms"].max() - table["start_ms"].min()) / 200)
    widened = 0
    for bar in (t for t in fig.data if t.type == "bar"):
        drawn = np.asarray(bar.x, dtype=float)
        took = np.asarray(bar.customdata, dtype=float)[:, 4]
        assert (drawn >= shortest - 1e-9).all()
        assert np.allclose(drawn, np.maximum(took, shortest))  # only the short ones change
        assert "took %{customdata[4]:.3f} ms" in bar.hovertemplate
        widened += int((took < shortest).sum())
    measured = {(s.phase, s.batch, s.lane): s.duration * 1e3 for s in trace.spans if s.phase == "forward"}
    start, drawn, took, batches = _forwards(fig, gpus - 1)
    assert np.allclose(took, [measured[("forward", b, gpus - 1)] for b in batches])
    # Exactly the spans shorter than the least width were widened (these runs usually have such slivers:
    # at 8 GPUs each forward is a few tenths of a percent; on a loaded machine the times may say otherwise).
    durations = table["end_ms"] - table["start_ms"]
    assert int((durations < shortest - 1e-6).sum()) <= widened <= int((durations < shortest + 1e-6).sum())
    said = f"spans shorter than {shortest:.3g} ms" in fig.layout.title.subtitle.text
    assert said == (widened > 0) and said == ("the hover gives the measured time" in fig.layout.title.subtitle.text)


@pytest.mark.parametrize("gpus,train,entries", [(2, False, 4), (8, False, 5), (8, True, 9), (16, True, 9)])
def test_legend_has_one_entry_per_phase_in_rows_above_the_lanes(gpus, train, entries):
    fig = timeline_figure(recorded(gpus=gpus, train=train))
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert len(names) == len(set(names)) == entries  # not one per device: the lane names the device
    assert not any(n.startswith("GPU") for n in names)
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.yanchor == "bottom" and legend.y > 1
    assert legend.entrywidthmode == "fraction" and legend.entrywidth * 5 == pytest.approx(1)
    rows = -(-entries // 5)
    # The rows fit between the two-line subtitle (about 112 px from the top) and the lanes.
    assert fig.layout.margin.t >= 112 + 28 * rows
    assert fig.layout.title.yanchor == "middle" and fig.layout.title.y * fig.layout.height >= fig.layout.height - 45
    assert max(map(len, names)) <= 14  # five to a row stay apart on a 700 px wide plot


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
    idle = _bars(fig, "idle (no rows)")
    assert sorted(np.asarray(idle.y).tolist()) == [5, 6, 7]
    assert set(np.asarray(idle.customdata)[:, 0].tolist()) == {3}


def test_single_device_lane():
    fig = timeline_figure(recorded(gpus=1))
    assert list(fig.layout.yaxis.ticktext) == ["GPU 0"]
    assert {t.name for t in fig.data} == {"forward", "scatter"}


def test_title_says_all_batches_and_simulated_once():
    fig = timeline_figure(recorded(gpus=2))
    assert fig.layout.title.text == "Timeline of all 4 batches, one lane per GPU"
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1


def test_largest_run_shows_a_window_under_the_bound():
    trace = synthetic(LARGEST)
    size = timeline_window(trace)
    assert size == MAX_MARKS // (4 * 16)
    fig = timeline_figure(trace)
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES
    assert fig.layout.title.text == f"Timeline of batches 0-{size - 1} of 10,000 (a window of {size} batches)"
    assert "first_batch" in fig.layout.title.subtitle.text
    later = timeline_figure(trace, first_batch=9_990)
    assert "batches 9,990-9,999 of 10,000" in later.layout.title.text
    assert set(_forwards(later, 0)[3].tolist()) == set(range(9_990, 10_000))


def test_bad_window_is_a_clear_error():
    trace = recorded(gpus=8)
    with pytest.raises(ValueError, match="batch must be between 0 and 3"):
        timeline_figure(trace, first_batch=4)
    with pytest.raises(ValueError, match="batches must be between 1 and"):
        timeline_figure(trace, batches=0)


# Training: loss, each replica's backward, the sum and the step, on their lanes.

def test_one_backward_bar_per_replica_per_batch_on_its_lane():
    trace = recorded(gpus=3, train=True)
    fig = timeline_figure(trace)
    back = _bars(fig, "backward (×)")
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
    names = {t.name for t in fig.data}
    for name in ("loss", "SGD step") + (("sum of grads",) if gpus > 1 else ()):
        bar = _bars(fig, name)
        assert np.asarray(bar.y).tolist() == [0] * 4
        assert np.asarray(bar.customdata)[:, 0].astype(int).tolist() == [0, 1, 2, 3]
    assert (gpus > 1) == ("sum of grads" in names)
    hatches = {t.name: t.marker.pattern.shape for t in fig.data if t.type == "bar"}
    phase_hatches = [h for n, h in hatches.items() if n in ("backward (×)", "loss", "sum of grads", "SGD step")]
    assert len(set(phase_hatches)) == len(phase_hatches)  # every training phase looks different


def test_simulated_backward_note_only_for_simulated_multi_device_training():
    note = "one after another on the CPU autograd thread"
    assert any(note in a.text for a in timeline_figure(recorded(gpus=3, train=True)).layout.annotations)
    assert not timeline_figure(recorded(gpus=3)).layout.annotations
    assert not any(note in a.text for a in timeline_figure(as_cuda(recorded(gpus=3, train=True))).layout.annotations)


def test_idle_band_covers_the_way_back():
    trace = recorded(gpus=8, train=True)
    table = prepare_timeline(trace, 3, 3)
    idle = table[table["phase"] == "idle"]
    step = [s for s in trace.spans if s.phase == "step" and s.batch == 3][0]
    assert idle["device"].tolist() == [5, 6, 7] and np.allclose(idle["end_ms"], step.end * 1e3)


def test_largest_training_run_keeps_the_bound():
    trace = synthetic(LARGEST_TRAINING)
    size = timeline_window(trace)
    assert size == MAX_MARKS // (5 * 16 + 3)
    for first in (0, len(trace.batches) - size):
        fig = timeline_figure(trace, first_batch=first)
        assert count_marks(fig) <= MAX_MARKS
        assert len(fig.to_json()) < MAX_JSON_BYTES
    backs = _bars(fig, "backward (×)")
    assert len(np.asarray(backs.y)) == size * 15  # 30 rows on 16 GPUs: 15 chunks of 2 per batch

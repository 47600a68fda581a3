"""Timeline: one lane per device, every span at its measured time, idle bands, a window past the bound."""
import numpy as np
import pytest

from dpviz.figures import MAX_MARKS, count_marks, prepare_timeline, timeline_figure, timeline_window
from figure_traces import LARGEST, LARGEST_TRAINING, MAX_JSON_BYTES, as_cuda, recorded, synthetic


def _bars(fig, name):
    (trace,) = [t for t in fig.data if t.name == name]
    return trace


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
    for device in range(3):
        bar = _bars(fig, f"GPU {device} forward")
        spans = sorted((s for s in trace.spans if s.phase == "forward" and s.lane == device), key=lambda s: s.batch)
        assert np.allclose(np.asarray(bar.base), [s.start * 1e3 for s in spans])
        assert np.allclose(np.asarray(bar.x), [s.duration * 1e3 for s in spans])
        assert (np.asarray(bar.y) == device).all()


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
    assert {t.name for t in fig.data} == {"GPU 0 forward", "scatter"}


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
    assert set(np.asarray(_bars(later, "GPU 0 forward").customdata)[:, 0].tolist()) == set(range(9_990, 10_000))


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
    back = _bars(fig, "backward (hatched ×): each replica, on its GPU")
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
    for name in ("loss: MSE on the output device", "step: SGD updates the parameters") + (
            ("sum: replicas' gradients added into .grad",) if gpus > 1 else ()):
        bar = _bars(fig, name)
        assert np.asarray(bar.y).tolist() == [0] * 4
        assert np.asarray(bar.customdata)[:, 0].astype(int).tolist() == [0, 1, 2, 3]
    assert (gpus > 1) == ("sum: replicas' gradients added into .grad" in names)
    hatches = {t.name: t.marker.pattern.shape for t in fig.data if t.type == "bar"}
    phase_hatches = [h for n, h in hatches.items() if n.split(":")[0] in ("backward (hatched ×)", "loss", "sum", "step")]
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
    backs = _bars(fig, "backward (hatched ×): each replica, on its GPU")
    assert len(np.asarray(backs.y)) == size * 15  # 30 rows on 16 GPUs: 15 chunks of 2 per batch

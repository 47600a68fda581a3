"""Step through: one animation frame per batch with that batch's split; representative frames past the bound."""
import numpy as np
import pytest

from dpviz import RunConfig
from dpviz.figures import MAX_FRAMES, MAX_MARKS, count_marks, step_figure
from dpviz.engines.dp.chunking import chunk_sizes
from figure_traces import LARGEST, MAX_JSON_BYTES, recorded, synthetic


def _frame_rows(frame):
    bars = frame.data[0]
    return dict(zip(bars.x, np.asarray(bars.y).tolist()))


def test_one_frame_per_batch_with_its_split():
    trace = recorded(gpus=8)
    fig = step_figure(trace)
    assert [f.name for f in fig.frames] == ["0", "1", "2", "3"]
    for frame, batch in zip(fig.frames, trace.batches):
        rows = _frame_rows(frame)
        assert list(rows) == [f"GPU {d}" for d in range(8)]
        expected = chunk_sizes(batch.rows, 8)
        assert list(rows.values()) == expected + [0] * (8 - len(expected))


def test_idle_devices_marked_idle_in_their_frame():
    fig = step_figure(recorded(gpus=8))
    last = fig.frames[3]
    assert list(last.data[1].x) == ["GPU 5", "GPU 6", "GPU 7"] and set(last.data[1].text) == {"idle"}
    assert len(fig.frames[0].data[1].x) == 0
    assert last.layout.title.text == "Batch 3 of 4: 10 rows → 2, 2, 2, 2, 2 on 5 of 8 GPUs (GPUs 5, 6 and 7 idle)"


def test_three_gpus_last_frame_says_4_4_2():
    fig = step_figure(recorded(gpus=3))
    assert list(_frame_rows(fig.frames[3]).values()) == [4, 4, 2]
    assert "10 rows → 4, 4, 2 on 3 of 3 GPUs" in fig.frames[3].layout.title.text


def test_play_button_and_slider_drive_the_frames():
    fig = step_figure(recorded(gpus=2))
    (menu,) = fig.layout.updatemenus
    assert [b.label for b in menu.buttons] == ["▶ play", "❚❚ pause"]
    assert menu.buttons[0].method == "animate"
    (slider,) = fig.layout.sliders
    assert [list(s.args[0]) for s in slider.steps] == [[f.name] for f in fig.frames]
    assert fig.layout.yaxis.range[1] >= 15  # fixed axis: frames compare at a glance
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1


def test_largest_run_steps_through_representative_batches():
    fig = step_figure(synthetic(LARGEST))
    names = [int(f.name) for f in fig.frames]
    assert len(names) <= MAX_FRAMES and 0 in names and 9_999 in names
    assert names == sorted(names)
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES
    assert "the first, the last, each new split" in fig.layout.title.subtitle.text


def test_short_last_batch_gets_a_frame_in_a_long_run():
    trace = recorded(gpus=8, data_size=4_010, batch_size=4)
    fig = step_figure(trace)
    assert int(fig.frames[-1].name) == 1_002
    assert list(_frame_rows(fig.frames[-1]).values()) == [1, 1, 0, 0, 0, 0, 0, 0]


def _below_plot_px(fig, paper_y):
    """Pixels under the plot's bottom edge of a paper y (negative y is under the plot)."""
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    return -paper_y * plot_px


@pytest.mark.parametrize("gpus", [2, 8, 16])
def test_play_buttons_and_slider_sit_in_rows_that_do_not_overlap(gpus):
    # Both start at the left edge, so at any chart width only their rows can keep them apart. Sizes
    # measured in headless Chromium at 420-1,000 px wide, with some slack: tick labels turned upright
    # ("GPU 15") and the axis title under them end 98 px under the plot, a row of buttons is 33 px tall,
    # the slider (current value, rail, labels) 74 px.
    fig = step_figure(synthetic(RunConfig(gpus=gpus, data_size=100, batch_size=30)))
    (menu,) = fig.layout.updatemenus
    (slider,) = fig.layout.sliders
    assert menu.yanchor == slider.yanchor == "top" and menu.x == slider.x == 0
    buttons_top = _below_plot_px(fig, menu.y)
    buttons_bottom = buttons_top + 33
    slider_top = _below_plot_px(fig, slider.y)
    assert buttons_top >= 98 + 4  # under the axis title
    assert slider_top >= buttons_bottom + 4  # the slider's current value, at its top, clears the buttons
    assert slider_top + 74 <= fig.layout.margin.b  # and the slider fits in the figure
    assert slider.currentvalue.prefix == "batch "

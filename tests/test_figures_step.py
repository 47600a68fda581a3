"""Step through: one batch's flow, one frame per DataParallel step in its order, each naming its devices."""
import dataclasses
from functools import lru_cache

import pytest

from dpviz import RunConfig, record
from dpviz.figures import MAX_FRAMES, MAX_MARKS, count_marks, step_figure
from dpviz.engines.dp.read.flow_draw import step_name
from dpviz.figures.layout import title_block_px
from dpviz.figures.presenting import presentation
from dpviz.figures.sizes import GAP_PX
from dpviz.engines.dp.read.step import prepare_steps
from dpviz.presets import PRESETS
from figure_traces import LARGEST_TRAINING, MAX_JSON_BYTES, recorded, synthetic

FORWARD_ONLY = ["scatter", "replicate", "forward", "gather"]
TRAINING = FORWARD_ONLY + ["loss", "backward", "reduce", "step"]


@lru_cache(maxsize=None)
def preset(name: str):
    return record(dataclasses.replace(PRESETS[name].config, backend="simulated"))


@pytest.mark.parametrize("train,order", [(False, FORWARD_ONLY), (True, TRAINING)])
def test_frames_follow_dataparallels_order(train, order):
    trace = recorded(gpus=8, train=train)
    table = prepare_steps(trace, 0)
    assert table["step"].tolist() == order
    fig = step_figure(trace, 0)
    assert [f.name for f in fig.frames] == [str(k) for k in range(1, len(order) + 1)]
    for frame, step in zip(fig.frames, order):
        assert f": {step_name(trace, step)}" in frame.layout.title.text.split("<br>")[0]


def test_each_frame_names_its_devices():
    trace = recorded(gpus=8, train=True)
    table = prepare_steps(trace, 3)  # 10 rows: 5 chunks of 2, GPUs 5-7 idle
    devices = dict(zip(table["step"], table["devices"]))
    used = [0, 1, 2, 3, 4]
    assert devices == {"scatter": used, "replicate": used, "forward": used, "gather": used,
                       "loss": [0], "backward": used, "reduce": [0], "step": [0]}
    words = dict(zip(table["step"], table["words"]))
    assert "10 rows are cut into 5 chunks" in words["scatter"] and "GPUs 5, 6 and 7 get none" in words["scatter"]
    assert "GPUs 0-4" in words["forward"] and "added on GPU 0" in words["reduce"]


def test_a_frame_lights_its_step_fades_the_earlier_and_hides_the_later():
    fig = step_figure(recorded(gpus=3, train=True), 3)
    steps = [t.meta["step"] for t in fig.data]
    for k, frame in enumerate(fig.frames):
        current = TRAINING[k]
        for step, kind, shown in zip(steps, [t.meta["kind"] for t in fig.data], frame.data):
            if TRAINING.index(step) > k and kind == "link":
                assert shown.opacity == 0
            if step == current:
                assert shown.opacity == 1
            if TRAINING.index(step) < k and kind == "link":
                assert 0 < shown.opacity < 1
    # The forwards' nodes show with the scatter band that lands on them, in the first frame.
    first = fig.frames[0].data
    nodes = [o.opacity for t, o in zip(fig.data, first) if t.meta["kind"] == "node" and t.meta["step"] == "forward"]
    assert nodes == [1.0, 1.0, 1.0]


def test_frames_show_the_devices_rows():
    fig = step_figure(recorded(gpus=3), 3)
    assert list(fig.layout.yaxis.ticktext)[1:] == ["GPU 0<br>rows 0-3 (4 rows)", "GPU 1<br>rows 4-7 (4 rows)",
                                                   "GPU 2<br>rows 8-9 (2 rows)"]


def test_failing_batch_stops_at_the_forward_that_raised():
    trace = preset("kwargs-small-batch")
    table = prepare_steps(trace, trace.failure.batch)
    assert table["step"].tolist() == ["scatter", "replicate", "forward"]
    words = dict(zip(table["step"], table["words"]))
    assert "GPUs 5, 6 and 7 get only the keywords" in words["scatter"]
    assert "GPU 5's replica raises TypeError" in words["forward"]
    assert dict(zip(table["step"], table["devices"]))["replicate"] == list(range(8))


def test_one_device_steps():
    assert prepare_steps(recorded(gpus=1, train=True), 0)["step"].tolist() == ["scatter", "forward", "loss", "backward", "step"]


def test_play_button_and_slider_drive_the_frames():
    fig = step_figure(recorded(gpus=2), 0)
    (menu,) = fig.layout.updatemenus
    assert [b.label for b in menu.buttons] == ["▶ play", "❚❚ pause"]
    assert menu.buttons[0].method == "animate"
    (slider,) = fig.layout.sliders
    assert [list(s.args[0]) for s in slider.steps] == [[f.name] for f in fig.frames]
    assert slider.currentvalue.prefix == "step "
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1


@pytest.mark.parametrize("bad", [-1, 4, "0", True])
def test_bad_batch_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="batch must be between 0 and 3"):
        step_figure(recorded(gpus=8), bad)


def test_largest_training_batch_stays_small():
    trace = synthetic(LARGEST_TRAINING)
    fig = step_figure(trace, len(trace.batches) - 1)
    assert len(fig.frames) <= MAX_FRAMES
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES


def _above_plot_px(fig, paper_y):
    """Pixels over the plot's top edge of a paper y (y over 1 is above the plot)."""
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    return (paper_y - 1) * plot_px


def assert_controls_between_title_and_plot(fig, scale: float = 1.0) -> None:
    """Play buttons over the slider over the plot, under the title block, at type `scale` times the usual. Both
    start at the left edge, so at any chart width only their rows keep them apart: a row of buttons is 33 px tall,
    the slider (current value, rail, step numbers) 74 px, at the usual type (measured in Chromium)."""
    (menu,) = fig.layout.updatemenus
    (slider,) = fig.layout.sliders
    assert menu.yanchor == slider.yanchor == "top" and menu.x == slider.x == 0
    buttons_top = _above_plot_px(fig, menu.y)
    slider_top = _above_plot_px(fig, slider.y)
    assert slider_top - 74 * scale >= 4  # the slider ends over the lanes: its numbers on the page, not on a bar
    assert buttons_top - 33 * scale >= slider_top + 4  # the buttons end over the slider
    title_px = title_block_px(fig)  # the longest frame's title is no longer than the room kept for it
    assert fig.layout.margin.t - buttons_top >= title_px


@pytest.mark.parametrize("gpus", [2, 8, 16])
@pytest.mark.parametrize("train", [False, True])
def test_play_buttons_and_slider_sit_between_the_title_and_the_lanes_in_rows_that_do_not_overlap(gpus, train):
    # Over the lanes, they are on a projector's first screen however tall 16 GPUs make the flow.
    fig = step_figure(synthetic(RunConfig(gpus=gpus, data_size=100, batch_size=30, train=train)), 0)
    assert_controls_between_title_and_plot(fig)


@pytest.mark.parametrize("gpus", [2, 4, 16])
def test_in_presenting_the_play_buttons_and_slider_follow_the_lanes_in_rows_that_do_not_overlap(gpus):
    # On a projector the lesson, the lanes, comes first under the title: the controls move under the steps' names
    # (the plain figure's bottom margin, grown with the type), the buttons' row over the slider's, as measured above.
    plain = step_figure(synthetic(RunConfig(gpus=gpus, data_size=100, batch_size=30, train=True)), 0)
    scale = 1.35
    presented = presentation(plain, scale=scale)
    assert_controls_under_plot(plain, presented, scale)
    # Nothing but the longest frame's title over the lanes (assert_controls_under_plot set it): a band kept there for
    # it twice, once as the plain figure kept it and once at the larger type, was blank on the projector.
    assert presented.layout.margin.t <= longest_title_block_px(presented) + GAP_PX * scale + 1


def longest_title_block_px(fig) -> float:
    """The title block of the frame whose title, as wrapped, takes the most room."""
    blocks = []
    for frame in fig.frames:
        fig.layout.title.text = frame.layout.title.text
        blocks.append(title_block_px(fig))
    return max(blocks)


def assert_controls_under_plot(plain, fig, scale: float) -> None:
    """`fig`, `plain` presented at type `scale`: its play buttons and slider under the plot's bottom edge (under the
    plain figure's bottom margin, grown with the type), the buttons' row over the slider's, as measured above, and
    every frame's title over the plot in the room the controls left."""
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    (menu,) = fig.layout.updatemenus
    (slider,) = fig.layout.sliders
    buttons_top, slider_top = -menu.y * plot_px, -slider.y * plot_px  # under the plot's bottom edge
    assert menu.yanchor == slider.yanchor == "top" and menu.x == slider.x == 0
    assert buttons_top >= plain.layout.margin.b * scale  # under the steps' names
    assert slider_top >= buttons_top + 33 * scale + 4  # the buttons end over the slider
    assert fig.layout.margin.b >= slider_top + 74 * scale  # the slider ends in the chart
    longest = max((f.layout.title.text for f in fig.frames), key=lambda t: t.count("<br>"))
    fig.layout.title.text = longest
    assert fig.layout.margin.t >= title_block_px(fig)  # every frame's title over the lanes
    assert fig.layout.margin.t < plain.layout.margin.t  # the controls' rows no longer over the lanes


def _scatter_words(trace, batch: int) -> str:
    table = prepare_steps(trace, batch)
    return table.loc[table["step"] == "scatter", "words"].item()


def test_scatter_keeps_chunk_0_on_gpu_0_and_copies_the_others(monkeypatch):
    """The tutorial moves the batch to GPU 0 first; torch's scatter moves chunk i to device i, skipping the copy
    where the chunk already is: chunk 0 stays, the rest go one to each other GPU."""
    from test_figures_flow import _torch_scatter
    config = RunConfig()  # the page's default: the tutorial's model on 2 GPUs
    (x,), (inputs, _) = _torch_scatter(monkeypatch, config, 0)
    trace = record(dataclasses.replace(config, backend="simulated"))
    assert len(inputs) == len(x.chunk(config.gpus)) == 2
    words = _scatter_words(trace, 0)
    assert f"{x.shape[0]} rows are cut into 2 chunks in order on GPU 0" in words
    assert "chunk 0 stays there, chunk 1 is copied to GPU 1" in words and "each of GPUs 0" not in words


def test_scatter_counts_the_pieces_zip_kept_and_the_rows_no_replica_got(monkeypatch):
    """rnn-hidden-dim: torch cuts x into 2 chunks and h0 (layers, batch, hidden) on dim 0 into 1 piece; zip keeps
    one replica, so x's second chunk reaches none."""
    from test_figures_flow import _torch_scatter
    trace = preset("rnn-hidden-dim")
    (x, h0), (inputs, _) = _torch_scatter(monkeypatch, PRESETS["rnn-hidden-dim"].config, 0)
    chunks, pieces = x.chunk(len(trace.lanes), trace.dim), h0.chunk(len(trace.lanes), trace.dim)
    reached = sum(args[0].shape[trace.dim] for args in inputs)
    words = _scatter_words(trace, 0)
    assert f"cut into {len(chunks)} chunks" in words and "cut into 1 chunk " not in words
    assert f"h0 gives only {len(pieces)} piece on dim {trace.dim}" in words and f"so {len(inputs)} replica runs" in words
    assert f"rows {reached}-{x.shape[trace.dim] - 1} reach no replica" in words and "GPU 1 gets none" in words


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("gpus", [8, 16])
def test_presenting_every_gpus_lane_of_flow_and_step_through_ends_on_a_projectors_first_screen(gpus, train):
    """DataParallel's page in Presenting at 1024 x 768 (its batch slider above the chart): every lane of the Flow and of
    Step through, each GPU's label at Presenting's size for labels, on the first screen. Two-line labels and a
    step's sentence in the title's type put GPUs 6-7 of 8 and 8-15 of 16 under it."""
    from dpviz.engines.dp.read.flow import flow_figure
    from dpviz.figures.sizes import TICK_SIZE
    from dpviz.page import room

    room.start("How nn.DataParallel splits a batch")
    room.add(room.CONTROL_PX)
    first_screen = room.left_px()
    trace = recorded(gpus=gpus, train=train)
    for plain in (flow_figure(trace, 2), step_figure(trace, 2)):
        fig = presentation(plain, room_px=first_screen)
        layout = fig.layout
        plot = layout.height - layout.margin.t - layout.margin.b
        assert layout.margin.t + plot <= first_screen  # the lanes end on the first screen
        low, high = layout.yaxis.range
        centres = sorted(layout.margin.t + (y - high) / (low - high) * plot for y in layout.yaxis.tickvals)
        assert [t.split(":")[0] for t in layout.yaxis.ticktext[1:]] == [f"GPU {g}" for g in range(gpus)]
        size = layout.yaxis.tickfont.size
        assert size >= round(TICK_SIZE * 1.35, 1)  # the ticks' Presenting size (presentation() rounds it), not smaller
        # one-line labels that clear each other, the last one inside the plot
        assert all("<br>" not in t for t in layout.yaxis.ticktext)
        assert min(b - a for a, b in zip(centres, centres[1:])) >= size
        assert centres[-1] + size / 2 <= layout.margin.t + plot

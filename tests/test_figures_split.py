"""Split per batch: stacked bars add up to each batch, idle devices are grey, long runs are grouped."""
import numpy as np
import pytest
import torch

from dpviz.figures import MAX_MARKS, count_marks, prepare_split, split_figure
from dpviz.figures.colors import IDLE_GREY, TEXT, WHITE, contrast_ratio, device_color
from dpviz.engines.dp.chunking import chunk_sizes
from dpviz.presets import PRESETS
from dpviz.figures.text_fit import unwrap
from figure_traces import LARGEST, MAX_JSON_BYTES, as_cuda, recorded, synthetic


def _bars(fig):
    """{device name: {bar label: rows}} from the stacked bar traces."""
    return {t.name: dict(zip(t.x, t.y)) for t in fig.data if t.type == "bar" and t.name.startswith("GPU")}


def _grid(fig):
    (heatmap,) = [t for t in fig.data if t.type == "heatmap"]
    return np.asarray(heatmap.z, dtype=float), list(heatmap.y)


@pytest.mark.parametrize("gpus", [2, 3, 8, 16])
def test_bars_sum_to_batch_rows_and_follow_torch_chunk(gpus):
    trace = recorded(gpus=gpus)
    bars = _bars(split_figure(trace))
    for batch in trace.batches:
        label = str(batch.index + 1)  # bars are numbered from 1
        per_device = [bars.get(f"GPU {d}", {}).get(label, 0) for d in range(gpus)]
        expected = chunk_sizes(batch.rows, gpus)
        assert per_device == expected + [0] * (gpus - len(expected))
        assert sum(per_device) == batch.rows


def test_ten_rows_on_eight_gpus_three_idle_in_grey():
    fig = split_figure(recorded(gpus=8))
    z, names = _grid(fig)
    assert names == [f"GPU {d}" for d in range(8)]
    assert z.shape == (8, 4)
    assert [names[d] for d in np.flatnonzero(z[:, 3] == -1)] == ["GPU 5", "GPU 6", "GPU 7"]
    assert (z[:, :3] == np.arange(8)[:, None]).all()  # full batches: every device in its own colour
    # The key figures' words; the title wraps to a narrow chart.
    assert "(GPU turns left idle: 3 of 32)" in unwrap(fig.layout.title.text)
    assert any(t.name == "idle: no replica" for t in fig.data)
    assert not any(t.name == "called, no rows" for t in fig.data)  # nobody was called without rows


def test_prepared_table_marks_idle_devices():
    table = prepare_split(recorded(gpus=8))
    assert len(table) == 4 * 8
    idle = table[~table["used"]]
    assert idle["batch"].tolist() == [3, 3, 3] and idle["device"].tolist() == [5, 6, 7]
    assert (idle["rows"] == 0).all()


def test_axes_titled_and_simulated_said_once():
    fig = split_figure(recorded(gpus=3))
    assert fig.layout.yaxis.title.text == "rows of the batch"
    assert fig.layout.xaxis2.title.text == "batch"
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1
    assert "simulated" not in split_figure(as_cuda(recorded(gpus=3))).to_json().lower()


def test_largest_run_groups_batches_with_the_same_split():
    trace = synthetic(LARGEST)
    fig = split_figure(trace)
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES
    table = prepare_split(trace)
    groups = table.drop_duplicates("bar")
    assert groups["first_batch"].tolist() == [0] and groups["last_batch"].tolist() == [9_999]
    assert groups["batches"].sum() == 10_000
    bars = _bars(fig)
    (label,) = bars["GPU 0"]
    assert label.startswith("1-10,000")
    per_device = [bars.get(f"GPU {d}", {}).get(label, 0) for d in range(16)]
    assert per_device == [2] * 15 + [0]  # ceil(30/16) = 2 rows per chunk: 15 chunks, GPU 15 idle
    assert "share one bar" in fig.layout.title.subtitle.text
    assert "(GPU turns left idle: 10,000 of 160,000)" in unwrap(fig.layout.title.text)


def test_grouping_keeps_the_short_last_batch_apart():
    trace = recorded(gpus=8, data_size=4_010, batch_size=4)  # 1,003 batches: past the bound on 8 GPUs
    fig = split_figure(trace)
    assert count_marks(fig) <= MAX_MARKS
    table = prepare_split(trace).drop_duplicates("bar")
    assert list(zip(table["first_batch"], table["last_batch"])) == [(0, 1_001), (1_002, 1_002)]
    bars = _bars(fig)
    assert [bars[f"GPU {d}"].get("1,003", 0) for d in range(8)] == [1, 1, 0, 0, 0, 0, 0, 0]
    z, _ = _grid(fig)
    assert (z[:, 1] == -1).sum() == 6


@pytest.mark.parametrize("gpus", [8, 16])
def test_numbers_on_the_bars_contrast_with_their_colour(gpus):
    fig = split_figure(recorded(gpus=gpus))
    bars = {t.name: t for t in fig.data if t.type == "bar" and t.name.startswith("GPU")}
    assert bars["GPU 6"].insidetextfont.color == TEXT  # dark on the yellow, not white
    assert bars["GPU 7"].insidetextfont.color == WHITE  # white on the black
    for name, bar in bars.items():
        assert bar.text is not None and bar.textposition == "inside"
        assert contrast_ratio(bar.insidetextfont.color, device_color(int(name.split()[1]))) >= 4
    (grid,) = [t for t in fig.data if t.type == "heatmap"]
    assert contrast_ratio(grid.textfont.color, IDLE_GREY) >= 4.5  # "idle" is written on grey cells only


def test_keyword_pitfall_draws_replicas_called_without_rows_and_marks_the_one_that_raised():
    trace = recorded(**{k: v for k, v in PRESETS["kwargs-small-batch"].config.to_dict().items() if k != "backend"})
    last = trace.failure.batch
    chunks = torch.empty(trace.batches[last].rows, 5).chunk(8)  # 5 chunks of x for 8 GPUs
    fig = split_figure(trace)
    bars = _bars(fig)
    assert [bars.get(f"GPU {d}", {}).get(str(last + 1), 0) for d in range(8)] == [len(c) for c in chunks] + [0] * 3
    table = prepare_split(trace)
    states = table[table["batch"] == last].set_index("device")
    assert list(states["state"]) == ["rows"] * len(chunks) + ["called, no rows"] * (8 - len(chunks))
    assert list(states.index[states["raised"]]) == [trace.failure.replica] == [5]
    assert not table.loc[table["batch"] < last, "raised"].any()
    z, names = _grid(fig)
    assert np.isnan(z[5:, last]).all() and (z[:5, last] == np.arange(5)).all()  # no fill: neither idle nor a device's
    words = {(x, y): t for tr in fig.data if tr.type == "scatter" and tr.mode == "text" for x, y, t in zip(tr.x, tr.y, tr.text)}
    shown = str(last + 1)  # the bar's label, numbered from 1
    assert words == {(shown, "GPU 5"): "✗ raised", (shown, "GPU 6"): "no rows", (shown, "GPU 7"): "no rows"}
    rings = [(s.y0 + s.y1) / 2 for s in fig.layout.shapes]
    assert rings == [5, 6, 7]
    assert any("GPU 5" in a.text and "raised" in a.text for a in fig.layout.annotations)
    assert "(no GPU turn left idle)" in unwrap(fig.layout.title.text) and "3 replicas called with no rows" in fig.layout.title.subtitle.text
    assert any(t.name == "called, no rows" for t in fig.data)


def test_a_failing_replica_with_rows_is_marked_on_its_colour():
    trace = recorded(**{k: v for k, v in PRESETS["rnn-hidden-dim"].config.to_dict().items() if k != "backend"})
    table = prepare_split(trace)
    assert list(table["state"]) == ["rows", "idle"] and list(table["raised"]) == [True, False]
    fig = split_figure(trace)
    (words,) = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    assert list(words.text) == ["✗ raised"] and list(words.textfont.color) == [WHITE]  # on GPU 0's blue


def test_no_idle_entry_in_the_legend_when_no_gpu_was_idle():
    fig = split_figure(recorded(gpus=2))  # 100 rows in batches of 30 and 10: both GPUs busy in every batch
    assert (_grid(fig)[0] >= 0).all()
    assert "(no GPU turn left idle)" in unwrap(fig.layout.title.text)
    assert not any(t.name == "idle: no replica" for t in fig.data)


def test_many_batches_drop_the_outlines_and_gaps_that_would_outweigh_thin_bars():
    few, many = split_figure(recorded(gpus=8)), split_figure(recorded(gpus=8, data_size=4500))  # 4 and 150 batches
    bars = lambda fig: [t for t in fig.data if t.type == "bar" and t.x is not None and len(t.x) and t.x[0] is not None]
    grid = lambda fig: next(t for t in fig.data if t.type == "heatmap")
    assert all(t.marker.line.width == 0.6 for t in bars(few)) and grid(few).xgap == 2
    assert all(t.marker.line.width == 0 for t in bars(many)) and grid(many).xgap == 0


@pytest.mark.parametrize("gpus", [4, 8, 16])
def test_the_legend_has_room_for_its_rows_over_the_plot_on_the_narrowest_chart(gpus):
    """At 4 GPUs the legend takes two rows on an 800 px window's chart (about 440 px, less the axes' names):
    the room over the plot holds them under the subtitle (one row was kept, and GPU 0-2 sat on the subtitle)."""
    from dpviz.figures.layout import title_block_px
    from dpviz.figures.legends import legend_px
    from dpviz.figures.sizes import GAP_PX
    from dpviz.figures.text_fit import text_px

    fig = split_figure(recorded(gpus=gpus))
    margin = fig.layout.margin
    names = [t.name for t in fig.data if t.type == "bar" and t.name.startswith("GPU")]
    # The left margin, set, holds the devices' names, the axis title's line and their gaps: plotly's automargin
    # would push it there anyway, leaving the legend less than planned.
    assert margin.l >= text_px(names[-1], 14) + 1.3 * 15 + 2 * 15
    room = margin.t - title_block_px(fig) - GAP_PX
    assert room >= legend_px(fig, 440, margins=(margin.l, margin.r))
    per_row = (440 - margin.l - margin.r) // (40 + text_px("GPU 0", 14) + 5)  # plotly's entries: swatch, name, gap
    assert room >= -(-len(names) // per_row) * 26

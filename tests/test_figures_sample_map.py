"""Sample map: every dataset row placed once, at its batch and on its device; binned past the bound."""
import numpy as np
import pytest

from dpviz import RunConfig
from dpviz.figures import MAX_MARKS, count_marks, prepare_sample_map, sample_map_figure
from dpviz.figures.colors import TEXT, WHITE, device_color, text_color_on
from dpviz.figures.sample_map import MIN_MARKER_PX, PLOT_PX, TOP_PANEL_PX, exact_marks, marker_size, top_is_exact
from figure_traces import LARGEST, MAX_JSON_BYTES, recorded, synthetic
from dpviz.figures.text_fit import unwrap  # titles read without the line breaks styled() wraps them with


def _points(fig):
    """The dataset rows' markers (not the strokes that hatch the cells of devices 8-15, which hover nothing)."""
    return {t.name: t for t in fig.data if t.type == "scatter" and t.mode == "markers" and t.hoverinfo != "skip"
            and t.x is not None and len(t.x) and t.x[0] is not None}


def _ids(fig):
    """The text trace that writes dataset row ids into the bottom panel's cells."""
    (ids,) = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    return ids


def _heatmaps(fig):
    return [t for t in fig.data if t.type == "heatmap"]


def test_prepared_table_places_every_row_once():
    trace = recorded(gpus=8)
    table = prepare_sample_map(trace)
    assert sorted(table["sample"]) == list(range(100))
    assert (table["device"] >= 0).all()
    for span in trace.spans:
        if span.phase == "forward":
            rows = table[(table["batch"] == span.batch) & (table["device"] == span.lane)]
            assert rows["sample"].tolist() == trace.sample_ids(span)
            assert rows["position"].tolist() == list(range(span.row_offset, span.row_offset + span.rows))


def test_points_are_coloured_by_the_device_that_got_the_row():
    trace = recorded(gpus=3)
    points = _points(sample_map_figure(trace))
    assert set(points) == {"GPU 0", "GPU 1", "GPU 2"}
    for device in range(3):
        expected = sorted(
            (i, s.batch + 1) for s in trace.spans if s.phase == "forward" and s.lane == device for i in trace.sample_ids(s)
        )
        got = sorted(zip(np.asarray(points[f"GPU {device}"].x).tolist(), np.asarray(points[f"GPU {device}"].y).tolist()))
        assert got == expected  # batches numbered from 1, as the other views number them
    assert sum(len(p.x) for p in points.values()) == 100


def test_batches_show_contiguous_slices_with_their_dataset_rows():
    trace = recorded(gpus=8)
    fig = sample_map_figure(trace)
    (grid,) = _heatmaps(fig)
    z = np.asarray(grid.z, dtype=float)
    assert z.shape == (4, 30)
    assert z[0].tolist() == [d for d, n in enumerate([4] * 7 + [2]) for _ in range(n)]
    assert z[3, :10].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4] and np.isnan(z[3, 10:]).all()
    ids = np.asarray(grid.customdata)
    for batch in trace.batches:  # every cell's dataset row is in its hover, and its place in the batch from 1
        assert ids[batch.index, : batch.rows, 0].tolist() == batch.sample_ids
        assert ids[batch.index, : batch.rows, 1].tolist() == list(range(1, batch.rows + 1))
    assert "dataset row %{customdata[0]}" in grid.hovertemplate and "row %{customdata[1]} of the batch" in grid.hovertemplate
    axis = fig.layout.xaxis2  # under the grid: whole rows, counted from 1, at the cells' middles
    assert [t - v for t, v in zip(map(int, axis.ticktext), axis.tickvals)] == [1] * len(axis.tickvals)
    assert axis.ticktext[0] == "1" and len(axis.ticktext) <= 13
    # Thirty cells a batch leave ~10 px a cell on the narrowest chart: numbers that small were unreadable
    # on a projector (6-8 px); none are written, and the panel's title says where they are.
    assert not [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    assert "hover a cell" in fig.layout.annotations[1].text.replace("<br>", " ")


def test_narrow_batches_write_their_dataset_rows_large_enough_for_a_class():
    trace = recorded(gpus=8, batch_size=16)
    fig = sample_map_figure(trace)
    written = _ids(fig)
    assert written.textfont.size >= 12
    cells = {(x, y): t for x, y, t in zip(np.asarray(written.x).tolist(), np.asarray(written.y).tolist(), written.text)}
    assert len(cells) == 100 and cells[(0, 1)] == str(trace.batches[0].sample_ids[0])  # batch 1's first row
    assert written.xaxis == "x2" and list(fig.layout.xaxis2.range) == [-0.5, 15.5]  # the text adds no padding
    # Each number fits its cell on the narrowest chart, at its size (Arial's widths, on the wide side).
    from dpviz.figures.sizes import MARGIN, NARROWEST_PX
    from dpviz.figures.text_fit import text_px
    cell_px = (NARROWEST_PX - MARGIN["l"] - MARGIN["r"]) / 16
    assert max(text_px(t, written.textfont.size) for t in written.text) <= cell_px


def test_row_ids_contrast_with_their_cell():
    fig = sample_map_figure(recorded(gpus=8, batch_size=16))
    (grid,) = _heatmaps(fig)
    written = _ids(fig)
    z = np.asarray(grid.z, dtype=float)
    for x, y, color in zip(np.asarray(written.x), np.asarray(written.y), written.textfont.color):
        assert color == text_color_on(device_color(int(z[y - 1, x])))  # batch y is the grid's row y - 1
    colors = dict(zip(zip(np.asarray(written.y).tolist(), np.asarray(written.x).tolist()), written.textfont.color))
    assert colors[(1, 12)] == TEXT and colors[(1, 14)] == WHITE  # GPU 6's yellow, GPU 7's violet


@pytest.mark.parametrize("gpus,train", [(2, False), (8, False), (8, True), (16, True)])
def test_row_markers_are_no_wider_than_a_row_so_they_never_overlap(gpus, train):
    fig = sample_map_figure(recorded(gpus=gpus, train=train))
    points = _points(fig)
    assert list(fig.layout.xaxis.range) == [-0.5, 99.5]  # 100 rows share the width evenly
    (size,) = {p.marker.size for p in points.values()}
    assert MIN_MARKER_PX <= size < PLOT_PX / 100  # narrower than the width one dataset row gets
    assert size == marker_size(100, 4)


def test_marker_size_follows_the_width_and_height_per_row():
    assert marker_size(100, 4) == pytest.approx(PLOT_PX / 100 * 0.85)
    assert marker_size(10, 4) == 14  # capped: a big square per row reads as a bar
    assert marker_size(10, 100) == pytest.approx(TOP_PANEL_PX / 100 * 0.85)  # many batches: the height decides
    assert marker_size(1_000, 34) < MIN_MARKER_PX


def test_more_rows_than_fit_side_by_side_bin_the_top_panel_only():
    trace = synthetic(RunConfig(data_size=300, batch_size=30, gpus=8))
    table = prepare_sample_map(trace)
    assert exact_marks(table) <= MAX_MARKS and not top_is_exact(table, 300)
    fig = sample_map_figure(trace)
    assert not _points(fig)
    counts, cells = _heatmaps(fig)
    assert np.asarray(counts.z).sum() == 300 and counts.colorscale[0][1] != cells.colorscale[0][1]
    assert np.asarray(cells.z, dtype=float).shape == (10, 30)  # the bottom panel stays exact
    assert "top panel binned (more rows than fit side by side)" in unwrap(fig.layout.title.subtitle.text)
    assert "bottom panel binned" not in unwrap(fig.layout.title.subtitle.text)
    assert {t.name for t in fig.data if t.type == "scatter" and t.mode == "markers"} == {f"GPU {d}" for d in range(8)}
    assert top_is_exact(prepare_sample_map(synthetic(RunConfig(data_size=200, batch_size=30, gpus=8))), 200)


def test_without_shuffle_rows_go_in_order():
    trace = recorded(gpus=3, shuffle=False)
    fig = sample_map_figure(trace)
    assert "in order (shuffle=False)" in unwrap(fig.layout.title.text)
    points = _points(fig)
    xs = np.concatenate([np.asarray(p.x) for p in points.values()])
    ys = np.concatenate([np.asarray(p.y) for p in points.values()])
    assert (ys == xs // 30 + 1).all()
    assert "shuffled (shuffle=True)" in unwrap(sample_map_figure(recorded(gpus=3)).layout.title.text)


def test_axes_titled_and_simulated_said_once():
    fig = sample_map_figure(recorded(gpus=2))
    assert fig.layout.xaxis.title.text.startswith("dataset row")
    assert fig.layout.xaxis2.title.text.startswith("row within the batch")
    assert fig.layout.yaxis.title.text == "batch"
    assert unwrap(fig.layout.title.subtitle.text).lower().count("simulated") == 1


def test_largest_run_is_binned_under_the_bound():
    trace = synthetic(LARGEST)
    fig = sample_map_figure(trace)
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES
    counts, devices = _heatmaps(fig)
    assert np.asarray(counts.z).sum() == 300_000  # every dataset row counted once
    assert "binned" in unwrap(fig.layout.title.subtitle.text)
    z = np.asarray(devices.z, dtype=float)
    assert set(np.unique(z[~np.isnan(z)]).tolist()) <= set(range(15))  # GPU 15 never gets a row


def test_the_bottom_panel_bins_exactly_where_the_map_would_pass_the_bound():
    # 5,998 rows in 2,999 batches of 2: far too many rows for markers side by side, so the top panel is
    # binned (100 x 40 cells and 2 legend entries); with the bottom panel's 2,999 x 2 cells that is
    # 10,000 marks, still exact.
    fig = sample_map_figure(synthetic(RunConfig(data_size=5_998, batch_size=2, gpus=2)))
    assert "top panel binned" in unwrap(fig.layout.title.subtitle.text)
    assert "bottom panel binned" not in unwrap(fig.layout.title.subtitle.text)
    assert np.asarray(_heatmaps(fig)[1].z, dtype=float).shape == (2_999, 2)
    assert count_marks(fig) == 100 * 40 + 2 + 2_999 * 2 == MAX_MARKS
    # Two rows more make a 3,000th batch and 2 more cells: past the bound, so both panels are binned.
    binned = sample_map_figure(synthetic(RunConfig(data_size=6_000, batch_size=2, gpus=2, shuffle=False)))
    assert "bottom panel binned too" in unwrap(binned.layout.title.subtitle.text)
    assert count_marks(binned) <= MAX_MARKS


def test_long_last_batch_does_not_sneak_past_the_bound():
    # 2 batches of 4,999 and 1 rows: few rows but a 2 x 4,999 grid, so it must bin.
    fig = sample_map_figure(synthetic(RunConfig(data_size=5_000, batch_size=4_999, gpus=2)))
    assert count_marks(fig) <= MAX_MARKS


def test_batches_are_numbered_from_one_as_the_other_views_number_them():
    """The flow says 'Batch 4 of 4' for the last batch: the map's rows say 4 too, in both panels and binned."""
    from dpviz.figures.sample_map import _batch_labels

    trace = recorded(gpus=3)
    fig = sample_map_figure(trace)
    for axis in (fig.layout.yaxis, fig.layout.yaxis2):
        assert axis.tick0 == 1 and list(axis.range) == [len(trace.batches) + 0.5, 0.5]
    (grid,) = _heatmaps(fig)
    assert list(grid.y) == [1, 2, 3, 4] and "batch %{y}" in grid.hovertemplate
    assert _batch_labels(np.array([0, 25, 26])) == ["1-25", "26"]


def test_sixteen_gpus_slices_are_named_under_the_grid_every_kth_where_they_would_run_together():
    from dpviz.figures.compare import PRESENTING
    from dpviz.figures.presenting import TICK_GAP_PX
    from dpviz.figures.sample_map import NARROWEST_PX, MARGIN, TICK_SIZE
    from dpviz.figures.text_fit import text_px
    trace = recorded(gpus=16)
    table = prepare_sample_map(trace)
    fig = sample_map_figure(trace)
    axis = fig.layout.xaxis2
    assert axis.title.text.startswith("GPU holding each slice of batch 1")
    first = table[table["batch"] == table["batch"].min()]
    for value, text in zip(axis.tickvals, axis.ticktext):  # each tick in the middle of the slice of the GPU it names
        positions = first[first["device"] == int(text)]["position"]
        assert value == (positions.min() + positions.max()) / 2
    assert axis.ticktext[0] == "0" and len(axis.ticktext) > 1
    width = int(table["position"].max()) + 1
    gap_px = (axis.tickvals[1] - axis.tickvals[0]) * (NARROWEST_PX - MARGIN["l"] - MARGIN["r"]) / width
    assert max(text_px(t, TICK_SIZE * PRESENTING) for t in axis.ticktext) + TICK_GAP_PX <= gap_px

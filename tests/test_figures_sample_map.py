"""Sample map: every dataset row placed once, at its batch and on its device; binned past the bound."""
import numpy as np

from dpviz import RunConfig
from dpviz.figures import MAX_MARKS, count_marks, prepare_sample_map, sample_map_figure
from dpviz.figures.sample_map import exact_marks
from figure_traces import LARGEST, MAX_JSON_BYTES, recorded, synthetic


def _points(fig):
    return {t.name: t for t in fig.data if t.type == "scatter" and t.x is not None and len(t.x) and t.x[0] is not None}


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
            (i, s.batch) for s in trace.spans if s.phase == "forward" and s.lane == device for i in trace.sample_ids(s)
        )
        got = sorted(zip(np.asarray(points[f"GPU {device}"].x).tolist(), np.asarray(points[f"GPU {device}"].y).tolist()))
        assert got == expected
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
    assert ids[2].tolist() == trace.batches[2].sample_ids
    assert grid.text is not None and grid.text[0][0] == str(trace.batches[0].sample_ids[0])


def test_without_shuffle_rows_go_in_order():
    trace = recorded(gpus=3, shuffle=False)
    fig = sample_map_figure(trace)
    assert "in order (shuffle=False)" in fig.layout.title.text
    points = _points(fig)
    xs = np.concatenate([np.asarray(p.x) for p in points.values()])
    ys = np.concatenate([np.asarray(p.y) for p in points.values()])
    assert (ys == xs // 30).all()
    assert "shuffled (shuffle=True)" in sample_map_figure(recorded(gpus=3)).layout.title.text


def test_axes_titled_and_simulated_said_once():
    fig = sample_map_figure(recorded(gpus=2))
    assert fig.layout.xaxis.title.text.startswith("dataset row")
    assert fig.layout.xaxis2.title.text.startswith("row within the batch")
    assert fig.layout.yaxis.title.text == "batch"
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1


def test_largest_run_is_binned_under_the_bound():
    trace = synthetic(LARGEST)
    fig = sample_map_figure(trace)
    assert count_marks(fig) <= MAX_MARKS
    assert len(fig.to_json()) < MAX_JSON_BYTES
    counts, devices = _heatmaps(fig)
    assert np.asarray(counts.z).sum() == 300_000  # every dataset row counted once
    assert "binned" in fig.layout.title.subtitle.text
    z = np.asarray(devices.z, dtype=float)
    assert set(np.unique(z[~np.isnan(z)]).tolist()) <= set(range(15))  # GPU 15 never gets a row


def test_binning_starts_exactly_where_the_exact_map_would_pass_the_bound():
    # 5,000 rows in 100 batches of 50: 5,000 points + 100 x 50 cells = 10,000 marks, still exact.
    exact = sample_map_figure(synthetic(RunConfig(data_size=5_000, batch_size=50, gpus=4)))
    assert "binned" not in exact.layout.title.subtitle.text
    assert count_marks(exact) == MAX_MARKS
    # One row more makes a 101st batch: 5,001 + 101 x 50 marks, so the map is binned.
    trace = synthetic(RunConfig(data_size=5_001, batch_size=50, gpus=4, shuffle=False))
    assert exact_marks(prepare_sample_map(trace)) > MAX_MARKS
    binned = sample_map_figure(trace)
    assert "binned" in binned.layout.title.subtitle.text
    assert count_marks(binned) <= MAX_MARKS


def test_long_last_batch_does_not_sneak_past_the_bound():
    # 2 batches of 4,999 and 1 rows: few rows but a 2 x 4,999 grid, so it must bin.
    fig = sample_map_figure(synthetic(RunConfig(data_size=5_000, batch_size=4_999, gpus=2)))
    assert count_marks(fig) <= MAX_MARKS

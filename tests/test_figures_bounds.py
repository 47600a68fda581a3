"""The size bound and its helpers, and the synthetic large trace the figure tests rely on."""
import plotly.graph_objects as go
import pytest

from dpviz import RunConfig
from dpviz.figures.bounds import MAX_FRAMES, MAX_MARKS, batch_label, count_marks, representative_batches, split_runs
from figure_traces import recorded, synthetic


def test_bound_values():
    assert MAX_MARKS == 10_000 and MAX_FRAMES == 50


def test_count_marks_counts_every_kind_of_mark_and_frames():
    fig = go.Figure([go.Bar(x=[1, 2, 3], y=[1, 2, 3]), go.Heatmap(z=[[1, 2], [3, 4], [5, 6]])])
    fig.add_trace(go.Sankey(node=dict(label=["a", "b"]), link=dict(source=[0], target=[1], value=[1])))
    fig.frames = [go.Frame(data=[go.Scatter(x=[1, 2], y=[3, 4])])]
    assert count_marks(fig) == 3 + 6 + 3 + 2


def test_split_runs_and_labels():
    chunks = [(4, 4), (4, 4), (4, 4), (2,), (4, 4)]
    assert split_runs(chunks) == [(0, 2), (3, 3), (4, 4)]
    assert batch_label(3, 3) == "batch 4" and batch_label(0, 19_998) == "batches 1-19,999"  # read from 1


def test_representative_batches_keep_first_last_and_every_new_split():
    chunks = [(4, 4)] * 500 + [(3, 3)] * 10 + [(4, 4)] * 489 + [(1,)]
    picked = representative_batches(chunks, 20)
    assert len(picked) == 20 and picked == sorted(set(picked))
    assert {0, 500, 510, 999} <= set(picked)
    assert representative_batches(chunks[:5], 20) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        representative_batches(chunks, 0)


def _shape(trace):
    spans = sorted((s.batch, s.phase, s.lane, s.replica, s.row_offset, s.rows, tuple(s.input_shape or ()),
                    tuple(s.output_shape or ())) for s in trace.spans)
    return trace.lanes, [b.rows for b in trace.batches], [b.input_shape for b in trace.batches], spans


@pytest.mark.parametrize("settings", [dict(gpus=8), dict(gpus=3), dict(gpus=1), dict(gpus=16, data_size=200, batch_size=21),
                                      dict(gpus=8, train=True), dict(gpus=1, train=True)])
def test_synthetic_trace_has_the_shape_of_a_recorded_one(settings):
    real = recorded(**settings)
    fake = synthetic(RunConfig(**settings))
    assert _shape(fake) == _shape(real)
    assert sorted(i for b in fake.batches for i in b.sample_ids) == list(range(real.config.data_size))

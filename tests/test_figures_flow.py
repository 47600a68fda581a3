"""Flow: every step DataParallel takes for a batch, one row per GPU; torch.chunk is the oracle for the rows."""
import dataclasses
import json
from functools import lru_cache

import numpy as np
import pytest
import torch

from dpviz import record
from dpviz.engines.dp.read.flow import ONE_LINE_LANES, prepare_backward_flow, prepare_flow
from dpviz.figures import MAX_MARKS, count_marks, flow_figure
from dpviz.figures.colors import THEME_TEXT
from dpviz.engines.dp.read.flow_draw import CURVE, LABEL_SIZE
from dpviz.engines.dp.read.flow_links import prepare_flow_links
from dpviz.presets import PRESETS
from figure_traces import LARGEST, LARGEST_TRAINING, MAX_JSON_BYTES, as_cuda, recorded, synthetic


def torch_chunks(rows: int, gpus: int) -> list[int]:
    return [len(c) for c in torch.arange(rows).chunk(gpus)]


@lru_cache(maxsize=None)
def preset(name: str):
    return record(dataclasses.replace(PRESETS[name].config, backend="simulated"))


def _links(trace, batch, step):
    _, links = prepare_flow_links(trace, batch)
    return links[links["step"] == step]


def _bands(fig, step):
    return [t for t in fig.data if t.meta and t.meta["step"] == step and t.meta["kind"] == "link"]


def _end_height(band):
    """A band's height where it meets its target: its upper edge's last point to its lower edge's last."""
    y = np.asarray(band.y, dtype=float)
    return y[CURVE] - y[CURVE - 1]


def _lane_labels(fig):
    return dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))


@pytest.mark.parametrize("gpus", [2, 3, 8, 16])
@pytest.mark.parametrize("batch", [0, 3])
def test_scatter_links_carry_torch_chunks_rows_to_each_device(gpus, batch):
    trace = recorded(gpus=gpus)
    rows = trace.batches[batch].rows
    links = _links(trace, batch, "scatter")
    expected = torch_chunks(rows, gpus)
    assert links["rows"].tolist() == expected
    assert links["device"].tolist() == list(range(len(expected)))
    assert links["offset"].tolist() == [sum(expected[:d]) for d in range(len(expected))]
    # Drawn to one scale: each band is as tall, where it meets its GPU, as its rows.
    heights = [_end_height(b) for b in _bands(flow_figure(trace, batch), "scatter")]
    assert np.allclose(np.array(heights) / heights[0], np.array(expected) / expected[0])


def test_dataset_rows_travel_with_their_chunk():
    trace = recorded(gpus=3)
    ids = trace.batches[0].sample_ids
    hover = _links(trace, 0, "scatter")["hover"].iloc[1]
    assert "rows 10-19 (10 rows) of the batch to GPU 1" in hover
    assert ", ".join(str(i) for i in ids[10:18]) in hover


@pytest.mark.parametrize("gpus,batch,used", [(8, 0, 8), (8, 3, 5), (3, 3, 3), (16, 0, 15)])
def test_replicate_links_go_from_gpu_zeros_parameters_to_every_used_device(gpus, batch, used):
    trace = recorded(gpus=gpus)
    nodes, links = prepare_flow_links(trace, batch)
    replicate = links[links["step"] == "replicate"]
    (parameters,) = nodes.loc[nodes["kind"] == "parameters", "node"]
    assert set(replicate["source"]) == {parameters}
    assert nodes.loc[nodes["kind"] == "parameters", "lane"].tolist() == [0]
    assert replicate["device"].tolist() == list(range(used))
    assert (replicate["rows"] == 0).all()  # a whole model each, whatever the chunk
    assert len(_bands(flow_figure(trace, batch), "replicate")) == used


def test_one_device_neither_replicates_nor_gathers():
    trace = recorded(gpus=1)
    fig = flow_figure(trace, 0)
    assert "no gather" in fig.layout.title.text
    assert list(fig.layout.xaxis.ticktext) == ["scatter", "forward"]
    assert _links(trace, 0, "scatter")["rows"].tolist() == [30]
    assert _links(trace, 0, "replicate").empty and _links(trace, 0, "gather").empty


def test_gather_brings_every_row_back_to_the_output_device():
    trace = recorded(gpus=3)
    nodes, links = prepare_flow_links(trace, 3)
    gather = links[links["step"] == "gather"]
    assert gather["rows"].tolist() == [4, 4, 2]
    (output,) = nodes.loc[nodes["kind"] == "output"].itertuples()
    assert set(gather["target"]) == {output.node} and output.lane == 0 and output.rows == 10
    fig = flow_figure(trace, 3)
    assert list(fig.layout.xaxis.ticktext) == ["scatter", "replicate", "forward", "gather"]
    assert "gathered on GPU 0" in fig.layout.title.text


@pytest.mark.parametrize("gpus,batch", [(3, 0), (3, 3), (8, 3), (16, 0)])
def test_training_adds_the_way_back_with_the_forwards_rows_summed_on_gpu_zero(gpus, batch):
    trace = recorded(gpus=gpus, train=True)
    rows = trace.batches[batch].rows
    chunks = torch_chunks(rows, gpus)
    nodes, links = prepare_flow_links(trace, batch)
    by_step = {step: part for step, part in links.groupby("step")}
    (loss,) = nodes.loc[nodes["kind"] == "loss", "node"]
    assert by_step["loss"]["rows"].tolist() == [rows]
    back = by_step["backward"]
    assert set(back["source"]) == {loss}
    assert back["rows"].tolist() == chunks and back["device"].tolist() == list(range(len(chunks)))
    assert back["offset"].tolist() == [sum(chunks[:d]) for d in range(len(chunks))]
    (total,) = nodes.loc[nodes["kind"] == "sum"].itertuples()
    assert total.lane == 0
    assert by_step["reduce"]["device"].tolist() == list(range(len(chunks)))
    assert set(by_step["reduce"]["target"]) == {total.node}
    (step,) = nodes.loc[nodes["kind"] == "step"].itertuples()
    assert step.lane == 0 and by_step["step"][["source", "target"]].values.tolist() == [[total.node, step.node]]
    fig = flow_figure(trace, batch)
    assert list(fig.layout.xaxis.ticktext) == [
        "scatter", "replicate", "forward", "gather", "loss", "backward", trace.vocabulary.phase("reduce").label,
        trace.vocabulary.phase("step").label]
    heights = [_end_height(b) for b in _bands(fig, "backward")]
    assert np.allclose(np.array(heights) / heights[0], np.array(chunks) / chunks[0])


def test_backward_table_follows_the_trace():
    trace = recorded(gpus=8, train=True)
    table = prepare_backward_flow(trace, 3)
    assert table["used"].tolist() == [True] * 5 + [False] * 3
    assert table.loc[table["used"], "rows"].tolist() == [2] * 5
    assert table.loc[table["used"], "gradient_shape"].tolist() == [[2, 2]] * 5
    assert prepare_backward_flow(recorded(gpus=8), 3).empty  # forward only


def test_one_device_training_steps_without_a_sum():
    trace = recorded(gpus=1, train=True)
    nodes, links = prepare_flow_links(trace, 0)
    assert not (nodes["kind"] == "sum").any()
    (backward,) = nodes.loc[nodes["kind"] == "backward", "node"]
    assert links.loc[links["step"] == "step", "source"].tolist() == [backward]


def test_forward_only_flow_has_no_way_back():
    nodes, links = prepare_flow_links(recorded(gpus=3), 3)
    assert set(links["step"]) == {"scatter", "replicate", "gather"}
    assert not nodes["kind"].isin(["loss", "backward", "sum", "step"]).any()


def _label_centres_px(fig):
    """(pixel y, lines) of every lane label, from the figure's own height, margins and y range."""
    layout = fig.layout
    plot = layout.height - layout.margin.t - layout.margin.b
    low, high = layout.yaxis.range  # reversed: the first value is the bottom
    return [(layout.margin.t + (y - high) / (low - high) * plot, text.count("<br>") + 1)
            for y, text in zip(layout.yaxis.tickvals, layout.yaxis.ticktext)]


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("gpus", [2, 8, 16])
def test_lane_labels_never_overlap(gpus, train):
    for batch in (0, 3):
        fig = flow_figure(recorded(gpus=gpus, train=train), batch)
        labels = sorted(_label_centres_px(fig))
        assert len(labels) == gpus + 1  # every GPU, and GPU 0's parameters
        for (y0, lines0), (y1, lines1) in zip(labels, labels[1:]):
            assert y1 - y0 >= LABEL_SIZE  # the least the brief allows, and more:
            assert y1 - y0 >= (lines0 + lines1) / 2 * LABEL_SIZE * 1.2  # two-line labels with line spacing
        top, lines = labels[0]
        assert top - lines / 2 * LABEL_SIZE * 1.2 >= fig.layout.margin.t - 1  # the top label inside the plot area
        # past ONE_LINE_LANES GPUs every label is one line, its count of rows left to the band's width
        assert all(n == (1 if gpus >= ONE_LINE_LANES else 2) for _, n in labels)


def test_one_row_reads_row_not_rows_4_4():
    trace = recorded(gpus=4, data_size=95)  # the last batch: 5 rows split 2, 2, 1
    fig = flow_figure(trace, 3)
    labels = _lane_labels(fig)
    assert labels[2] == "GPU 2<br>row 4 (1 row)" and labels[0] == "GPU 0<br>rows 0-1 (2 rows)"
    assert labels[3] == "GPU 3<br>idle"
    text = fig.to_json()
    assert "rows 4-4" not in text and "row 4 (1 row)" in text


def test_idle_devices_are_marked_idle():
    trace = recorded(gpus=8)
    table = prepare_flow(trace, 3)
    assert table.loc[~table["used"], "name"].tolist() == ["GPU 5", "GPU 6", "GPU 7"]
    fig = flow_figure(trace, 3)
    idle = [a for a in fig.layout.annotations if a.text == "idle"]
    assert [a.y for a in idle] == [5, 6, 7]
    assert "5 of 8 GPUs" in fig.layout.title.text
    assert "GPUs 5, 6 and 7 idle" in fig.layout.title.subtitle.text
    assert not flow_figure(trace, 0).layout.annotations  # a full batch uses all eight


def test_failing_replica_is_marked_where_it_fails_and_keyword_only_replicas_are_called_with_no_rows():
    trace = preset("kwargs-small-batch")  # 8 GPUs, the last batch's 10 rows make 5 chunks of x
    batch = trace.failure.batch
    assert trace.failure.replica == 5
    nodes, links = prepare_flow_links(trace, batch)
    forward = nodes[nodes["step"] == "forward"]
    assert forward["kind"].tolist() == ["forward"] * 5 + ["failed", "no_rows", "no_rows"]
    assert forward["lane"].tolist() == list(range(8))
    assert links.loc[links["step"] == "scatter", "rows"].tolist() == torch_chunks(10, 8)
    assert links.loc[links["step"] == "replicate", "device"].tolist() == list(range(8))  # all 8 replicas were called
    assert not (links["step"] == "gather").any()
    fig = flow_figure(trace, batch)
    labels = _lane_labels(fig)
    assert [labels[lane] for lane in (5, 6, 7)] == [f"GPU {lane}: called, no rows" for lane in (5, 6, 7)]
    assert labels[4] == "GPU 4: rows 8-9" and labels[-1] == "GPU 0's parameters"  # 10 rows in chunks of 2
    assert not [a for a in fig.layout.annotations if a.text == "idle"]  # called, not idle
    (marker,) = [t for t in fig.data if t.meta and t.meta["kind"] == "failure"]
    assert list(marker.y) == [5] and list(marker.text) == ["TypeError"]
    assert "TypeError in replica 5 on GPU 5" in fig.layout.title.text


def test_batchnorm_failure_marks_the_one_row_replica():
    trace = preset("batchnorm-one-row")
    nodes, _ = prepare_flow_links(trace, trace.failure.batch)
    (failed,) = nodes[nodes["kind"] == "failed"].itertuples()
    assert failed.lane == trace.failure.replica == 2 and failed.rows == 1
    fig = flow_figure(trace, trace.failure.batch)
    (marker,) = [t for t in fig.data if t.meta and t.meta["kind"] == "failure"]
    assert list(marker.y) == [2]
    assert _lane_labels(fig)[3] == "GPU 3<br>idle"


def test_rows_that_reached_no_replica_are_counted():
    trace = preset("rnn-hidden-dim")  # h0 cut along its layers: one piece, so one replica of two
    fig = flow_figure(trace, 0)
    assert "15 rows reached no replica" in fig.layout.title.subtitle.text
    assert _links(trace, 0, "scatter")["rows"].tolist() == [15]


def test_simulated_said_once_and_only_for_simulated_traces():
    fig = flow_figure(recorded(gpus=8), 0)
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1
    assert "simulated" not in fig.layout.title.text.lower()
    real = flow_figure(as_cuda(recorded(gpus=8)), 0)
    assert "simulated" not in real.to_json().lower()
    assert "real GPUs" in real.layout.title.subtitle.text


def test_text_off_coloured_marks_takes_the_themes_colour():
    for fig in (flow_figure(recorded(gpus=8, train=True), 3), flow_figure(preset("kwargs-small-batch"), 3)):
        for annotation in fig.layout.annotations:
            assert annotation.bgcolor is not None or annotation.font.color is None, annotation.text
        for trace in fig.data:
            assert trace.textfont.color is None
        # The page theme's own ink, which Streamlit swaps in (dark on light, light on dark), not a colour of its own.
        assert fig.layout.xaxis.tickfont.color == THEME_TEXT == fig.layout.yaxis.tickfont.color
        assert fig.layout.plot_bgcolor != "white"


@pytest.mark.parametrize("bad", [-1, 4, "0", True])
def test_bad_batch_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="batch must be between 0 and 3"):
        flow_figure(recorded(gpus=8), bad)


@pytest.mark.parametrize("config", [LARGEST, LARGEST_TRAINING])
def test_largest_run_stays_small(config):
    trace = synthetic(config)
    for batch in (0, len(trace.batches) - 1):
        fig = flow_figure(trace, batch)
        assert count_marks(fig) <= MAX_MARKS
        assert len(fig.to_json()) < MAX_JSON_BYTES
        json.loads(fig.to_json())


def test_bands_of_gpus_8_to_15_are_hatched_like_their_boxes():
    from dpviz.figures.colors import device_color, with_alpha
    from dpviz.engines.dp.read.flow_draw import BAND_ALPHA

    fig = flow_figure(recorded(gpus=16), 0)
    bands = _bands(fig, "scatter") + _bands(fig, "gather")
    assert len(bands) == 2 * 15  # 30 rows on 15 GPUs, each scattered and gathered
    hatched = 0
    for band in bands:
        device = next(d for d in range(16) if band.fillcolor == with_alpha(device_color(d), BAND_ALPHA))
        if device >= 8:  # over the band's own colour, not stripes on nothing where the page's theme drops the template
            assert band.fillpattern.shape == "/" and band.fillpattern.fillmode == "overlay"
            hatched += 1
        else:
            assert not band.fillpattern.shape
    assert hatched == 2 * 7  # GPUs 8-14 (GPU 15 idle)


def _extent(trace_dict):
    y = [v for v in trace_dict.y if v is not None]
    return min(y), max(y)


@pytest.mark.parametrize("gpus,batch", [(4, 0), (8, 3), (16, 0)])
def test_gather_and_loss_are_drawn_on_the_output_devices_lane_only(gpus, batch):
    """The gathered output and the loss live on GPU 0: their nodes, and the bands' ends at them, stay
    inside GPU 0's row (lane 0 spans -0.5 to 0.5), whatever number of rows came back."""
    trace = recorded(gpus=gpus, train=True)
    fig = flow_figure(trace, batch)
    nodes, _ = prepare_flow_links(trace, batch)
    held = set(nodes.loc[nodes["kind"].isin(["output", "loss"]), "node"])
    assert len(held) == 2 and set(nodes.loc[nodes["kind"].isin(["output", "loss"]), "lane"]) == {0}
    drawn = [t for t in fig.data if t.meta and t.meta["kind"] == "node" and t.meta["node"] in held]
    assert len(drawn) == 2
    for node in drawn:
        top, bottom = _extent(node)
        assert -0.5 < top < bottom < 0.5, (node.meta, top, bottom)
    for band in _bands(fig, "gather"):  # each forward's output lands in its own slice of GPU 0's node
        y = np.asarray(band.y, dtype=float)
        assert -0.5 < y[CURVE - 1] <= y[CURVE] < 0.5
    # The slices add up to the node: every row that came back, in GPU order.
    ends = sorted((float(np.asarray(b.y)[CURVE - 1]), float(np.asarray(b.y)[CURVE])) for b in _bands(fig, "gather"))
    assert all(abs(a[1] - b[0]) < 1e-9 for a, b in zip(ends, ends[1:]))


@pytest.mark.parametrize("batch", [0, 3])
def test_the_title_counts_batches_from_one(batch):
    trace = recorded(gpus=3)
    assert fig_title(flow_figure(trace, batch)).startswith(f"Batch {batch + 1} of {len(trace.batches)}:")


def fig_title(fig):
    return fig.layout.title.text.replace("<br />", " ").replace("<br>", " ")


@pytest.mark.parametrize("gpus", [2, 8, 16])
def test_presenting_grows_the_lanes_with_their_labels(gpus):
    """Presenting: the labels grow 1.35 times, and the lanes with them, so "GPU 0's parameters" and
    "GPU 0 rows 0-1 (2 rows)" never run into each other (they did at 8 GPUs: 44 px lanes, 49 px labels)."""
    from dpviz.figures.presenting import presentation

    fig = presentation(flow_figure(recorded(gpus=gpus, train=True), 0))
    size = fig.layout.yaxis.tickfont.size
    assert size > LABEL_SIZE * 1.3
    labels = sorted(_label_centres_px(fig))
    for (y0, lines0), (y1, lines1) in zip(labels, labels[1:]):
        assert y1 - y0 >= (lines0 + lines1) / 2 * size * 1.3


def _rgba(fill: str, background: str) -> str:
    """A plotly fill ('#RRGGBB' or 'rgba(r,g,b,a)') as seen over `background`."""
    from dpviz.figures.colors import blend

    if fill.startswith("#"):
        return fill
    r, g, b, a = (float(v) for v in fill[fill.index("(") + 1:-1].split(","))
    return blend(f"#{int(r):02X}{int(g):02X}{int(b):02X}", a, background)


@pytest.mark.parametrize("background", ["#FFFFFF", "#0E1117"], ids=["light", "dark"])
def test_replicate_lines_and_the_scatter_node_stand_out_on_both_themes(background):
    """WCAG 1.4.11: a mark that carries meaning has 3:1 against the page. The replicate lines were a
    see-through brown (1.5:1 on the dark page, 2:1 on white); the batch's node a grey-green at 3.1:1."""
    from dpviz.figures.colors import contrast_ratio

    fig = flow_figure(recorded(gpus=8, train=True), 0)
    replicate = _bands(fig, "replicate")
    batch = [t for t in fig.data if t.meta and t.meta["kind"] == "node" and t.meta["step"] == "scatter"]
    assert replicate and len(batch) == 1
    for mark in replicate + batch:
        assert contrast_ratio(_rgba(mark.fillcolor, background), background) >= 3.5, mark.meta


@pytest.mark.parametrize("present", [False, True])
def test_step_names_sit_level_or_upright_in_the_room_under_the_lanes(present):
    """The steps' names are level where they fit, else upright: tilted part way, a name's box spans the next
    column's on a narrow chart. Upright, the longest still ends inside the chart, presenting too."""
    from dpviz.figures.presenting import presentation
    from dpviz.figures.text_fit import text_px

    fig = flow_figure(recorded(gpus=4, train=True), 3)
    fig = presentation(fig) if present else fig
    axis = fig.layout.xaxis
    assert {abs(a) for a in axis.autotickangles} <= {0, 90}
    assert "sum of gradients" in axis.ticktext
    size = axis.tickfont.size
    assert fig.layout.margin.b >= max(text_px(t, size) for t in axis.ticktext) + 8  # and the tick's gap


def _torch_scatter(monkeypatch, config, batch: int):
    """torch's own scatter_kwargs (its device copies swapped for torch.chunk) on `config`'s call of `batch`: the
    positional arguments DataParallel was handed, and what each replica got."""
    import torch.nn.parallel.scatter_gather as torch_sg
    from dpviz.engines.workload import tutorial_data as tutorial
    from test_scatter import _CpuScatter
    monkeypatch.setattr(torch_sg, "Scatter", _CpuScatter)
    _, loader = tutorial.build(config)
    data, ids = list(loader)[batch]
    args, kwargs = tutorial.call(config, data, ids.tolist())
    return args, torch_sg.scatter_kwargs(args, kwargs, list(range(config.gpus)), config.dim)


def test_a_gpu_with_rows_but_no_piece_of_h0_is_idle_for_h0_not_for_rows(monkeypatch):
    """rnn-hidden-dim: torch cuts x into a chunk per GPU, but h0 (layers, batch, hidden) on dim 0 into one piece;
    scatter zips the pieces, so GPU 1 runs no replica though x had rows for it."""
    trace = preset("rnn-hidden-dim")
    (x, h0), (inputs, _) = _torch_scatter(monkeypatch, PRESETS["rnn-hidden-dim"].config, 0)
    gpus = len(trace.lanes)
    assert len(x.chunk(gpus, trace.dim)) == gpus and len(h0.chunk(gpus, trace.dim)) == 1 and len(inputs) == 1
    fig = flow_figure(trace, 0)
    notes = fig.layout.title.subtitle.text.replace("<br>", " ")
    assert "GPU 1 idle: no piece of h0 for it (h0 was cut into 1 piece)" in notes and "no rows left" not in notes
    (mark,) = [a for a in fig.layout.annotations if a.text == "idle"]
    assert mark.y == 1 and "no piece of h0" in mark.hovertext and "no rows left" not in mark.hovertext


def test_gpus_past_torch_chunks_chunks_are_idle_for_want_of_rows(monkeypatch):
    """batchnorm-one-row's last batch: 5 rows on 4 GPUs make 3 chunks, so GPU 3 has no rows."""
    trace = preset("batchnorm-one-row")
    batch = trace.failure.batch
    (x,), (inputs, _) = _torch_scatter(monkeypatch, PRESETS["batchnorm-one-row"].config, batch)
    assert len(inputs) == len(x.chunk(len(trace.lanes))) == 3
    fig = flow_figure(trace, batch)
    assert "GPU 3 idle: no rows left for it" in fig.layout.title.subtitle.text
    (mark,) = [a for a in fig.layout.annotations if a.text == "idle"]
    assert mark.y == 3 and mark.hovertext.startswith("no rows left for it")

"""Flow (Sankey): link widths are the rows torch.chunk gives each device; idle devices are shown idle."""
import pytest

from dpviz.figures import MAX_MARKS, count_marks, flow_figure, prepare_backward_flow, prepare_flow
from dpviz.engines.dp.chunking import chunk_sizes
from figure_traces import LARGEST, MAX_JSON_BYTES, as_cuda, recorded, synthetic


def _sankey(fig):
    (sankey,) = [t for t in fig.data if t.type == "sankey"]
    return sankey


def _into_devices(sankey):
    """Link values from the batch node (0) to each device node, and those device nodes' labels."""
    links = [(t, v) for s, t, v in zip(sankey.link.source, sankey.link.target, sankey.link.value) if s == 0]
    return [v for _, v in links], [sankey.node.label[t] for t, _ in links]


@pytest.mark.parametrize("gpus", [2, 3, 8, 16])
@pytest.mark.parametrize("batch", [0, 3])
def test_link_widths_are_the_chunk_sizes_and_add_up_to_the_batch(gpus, batch):
    trace = recorded(gpus=gpus)
    rows = trace.batches[batch].rows
    widths, _ = _into_devices(_sankey(flow_figure(trace, batch)))
    assert widths == chunk_sizes(rows, gpus)
    assert sum(widths) == rows


def test_every_row_reaches_the_output_node():
    sankey = _sankey(flow_figure(recorded(gpus=3), 3))
    out = len(sankey.node.label) - 1
    assert sum(v for t, v in zip(sankey.link.target, sankey.link.value) if t == out) == 10
    assert sankey.node.label[out].startswith("output 10 × 2<br>on GPU 0")


def test_device_labels_name_rows_of_the_batch():
    _, labels = _into_devices(_sankey(flow_figure(recorded(gpus=8), 0)))
    assert labels[3] == "GPU 3: rows 12-15 (4 rows)"
    assert labels[7] == "GPU 7: rows 28-29 (2 rows)"
    _, labels = _into_devices(_sankey(flow_figure(recorded(gpus=3), 3)))
    assert labels == ["GPU 0: rows 0-3 (4 rows)", "GPU 1: rows 4-7 (4 rows)", "GPU 2: rows 8-9 (2 rows)"]


def test_ten_rows_on_eight_gpus_show_three_idle_devices():
    trace = recorded(gpus=8)
    table = prepare_flow(trace, 3)
    assert table.loc[~table["used"], "name"].tolist() == ["GPU 5", "GPU 6", "GPU 7"]
    assert table.loc[~table["used"], "label"].tolist() == ["GPU 5: idle", "GPU 6: idle", "GPU 7: idle"]
    fig = flow_figure(trace, 3)
    boxes = [a.text for a in fig.layout.annotations]
    assert boxes == ["GPU 5 idle", "GPU 6 idle", "GPU 7 idle"]
    assert "5 of 8 GPUs" in fig.layout.title.text
    assert "GPUs 5, 6 and 7 idle" in fig.layout.title.subtitle.text
    assert not flow_figure(trace, 0).layout.annotations  # a full batch uses all eight


def test_dataset_rows_travel_with_their_chunk():
    trace = recorded(gpus=3)
    table = prepare_flow(trace, 0)
    ids = trace.batches[0].sample_ids
    assert table["dataset_rows"].iloc[1].startswith(", ".join(str(i) for i in ids[10:18]))


def test_simulated_said_once_and_only_for_simulated_traces():
    fig = flow_figure(recorded(gpus=8), 0)
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1
    assert "simulated" not in fig.layout.title.text.lower()
    real = flow_figure(as_cuda(recorded(gpus=8)), 0)
    assert "simulated" not in real.to_json().lower()
    assert "real GPUs" in real.layout.title.subtitle.text


def test_single_device_has_no_gather():
    fig = flow_figure(recorded(gpus=1), 0)
    assert "no gather" in fig.layout.title.text
    widths, labels = _into_devices(_sankey(fig))
    assert widths == [30] and labels == ["GPU 0: rows 0-29 (30 rows)"]


@pytest.mark.parametrize("bad", [-1, 4, "0", True])
def test_bad_batch_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="batch must be between 0 and 3"):
        flow_figure(recorded(gpus=8), bad)


def test_largest_run_stays_small():
    trace = synthetic(LARGEST)
    for batch in (0, len(trace.batches) - 1):
        fig = flow_figure(trace, batch)
        assert count_marks(fig) <= MAX_MARKS
        assert len(fig.to_json()) < MAX_JSON_BYTES


# Training: the way back, from the output gradient on the output device to the step on device_ids[0].

def _links(sankey):
    return list(zip(sankey.link.source, sankey.link.target, sankey.link.value))


def _node(sankey, starts):
    (index,) = [i for i, label in enumerate(sankey.node.label) if label.startswith(starts)]
    return index


@pytest.mark.parametrize("gpus,batch", [(3, 0), (3, 3), (8, 3), (16, 0)])
def test_gradients_go_back_with_the_forward_chunk_sizes_and_are_summed_on_device_zero(gpus, batch):
    trace = recorded(gpus=gpus, train=True)
    sankey = _sankey(flow_figure(trace, batch))
    forward, _ = _into_devices(sankey)
    out = _node(sankey, "output")
    back = [(t, v) for s, t, v in _links(sankey) if s == out]
    assert [v for _, v in back] == forward == chunk_sizes(trace.batches[batch].rows, gpus)
    labels = [sankey.node.label[t] for t, _ in back]
    assert labels == [f"GPU {d}<br>grad of rows {sum(forward[:d])}-{sum(forward[:d + 1]) - 1}" for d in range(len(forward))]
    total = _node(sankey, f"sum of {len(forward)}<br>on GPU 0")
    assert [v for s, t, v in _links(sankey) if t == total] == forward
    assert sankey.node.color[total] == sankey.node.color[_node(sankey, "GPU 0<br>rows")]  # GPU 0's colour
    step = _node(sankey, "SGD<br>step")
    assert [(s, v) for s, t, v in _links(sankey) if t == step] == [(total, trace.batches[batch].rows)]


def test_backward_table_follows_the_trace():
    trace = recorded(gpus=8, train=True)
    table = prepare_backward_flow(trace, 3)
    assert table["used"].tolist() == [True] * 5 + [False] * 3
    assert table.loc[table["used"], "rows"].tolist() == [2] * 5
    assert table.loc[table["used"], "gradient_shape"].tolist() == [[2, 2]] * 5
    assert prepare_backward_flow(recorded(gpus=8), 3).empty  # forward only


def test_training_flow_titles_and_headers():
    fig = flow_figure(recorded(gpus=8, train=True), 3)
    assert fig.layout.title.text.endswith("gradients summed back onto GPU 0")
    assert [a.text for a in fig.layout.annotations][:6] == [
        "<b>batch</b>", "<b>forward</b>", "<b>gather, loss</b>", "<b>backward</b>", "<b>sum</b>", "<b>step</b>"]
    assert [a.text for a in fig.layout.annotations][6:] == ["GPU 5 idle", "GPU 6 idle", "GPU 7 idle"]
    assert fig.layout.title.subtitle.text.lower().count("simulated") == 1


def test_one_device_training_has_no_sum():
    sankey = _sankey(flow_figure(recorded(gpus=1, train=True), 0))
    assert not [label for label in sankey.node.label if label.startswith("sum of")]
    step = _node(sankey, "SGD<br>step")
    (into_step,) = [(s, v) for s, t, v in _links(sankey) if t == step]
    assert sankey.node.label[into_step[0]] == "GPU 0<br>grad of rows 0-29" and into_step[1] == 30


def test_forward_only_flow_has_no_way_back():
    labels = _sankey(flow_figure(recorded(gpus=3), 3)).node.label
    assert len(labels) == 5 and not any("gradient" in label or "step" in label for label in labels)

"""Inputs view: what each GPU received of each argument, read back from the figure's own data."""
import dataclasses

import pytest
import torch

from dpviz import RunConfig, record
from dpviz.figures import inputs_figure, prepare_inputs
from dpviz.figures.inputs import MODE_WORDS
from dpviz.presets import PRESETS


def cells(fig):
    """{(argument, GPU name): text} from the heatmap."""
    heat = fig.data[0]
    return {(arg, gpu): heat.text[i][j] for i, arg in enumerate(heat.y) for j, gpu in enumerate(heat.x)}


def test_a_keyword_pitfall_shows_the_replicas_called_without_x():
    trace = record(PRESETS["kwargs-small-batch"].config)
    last = trace.failure.batch
    table = prepare_inputs(trace, last)
    chunks = torch.empty(trace.batches[last].rows, 5).chunk(8)  # torch's split of the last batch
    x = table[table["argument"] == "x"].set_index("device")
    assert list(x["mode"]) == ["split"] * len(chunks) + ["missing"] * (8 - len(chunks))
    assert [list(s) for s in x["shape"][: len(chunks)]] == [list(c.shape) for c in chunks]
    scale = table[table["argument"] == "scale="]
    assert set(scale["mode"]) == {"shared"} and len(scale) == 8  # a float goes to every device, even the unused
    fig = inputs_figure(trace, last)
    assert cells(fig)[("x", "GPU 5")] == "missing" and cells(fig)[("x", "GPU 0")] == "2 × 5"
    assert {t.name for t in fig.data[1:]} == {MODE_WORDS[m] for m in ("split", "shared", "missing")}
    assert "called without x" in fig.layout.title.subtitle.text and "TypeError" in fig.layout.title.subtitle.text


def test_a_python_list_reaches_every_replica_whole():
    trace = record(RunConfig(model="cnn", inputs="list", gpus=3, data_size=20, batch_size=10))
    table = prepare_inputs(trace, 0)
    ids = table[table["argument"] == "row_ids"]
    assert set(ids["mode"]) == {"copied"} and [list(s) for s in ids["shape"]] == [[10]] * 3
    x = table[table["argument"] == "x"]
    assert [list(s) for s in x["shape"]] == [list(c.shape) for c in torch.empty(10, 1, 5, 5).chunk(3)]
    assert cells(inputs_figure(trace, 0))[("row_ids", "GPU 2")] == "list of 10, whole"


def test_an_unused_device_is_idle_for_every_argument():
    trace = record(PRESETS["rnn-hidden-dim"].config)
    table = prepare_inputs(trace, 0)
    assert set(table.loc[table["device"] == 1, "mode"]) == {"idle"}
    h0 = table[(table["argument"] == "h0") & (table["device"] == 0)].iloc[0]
    assert list(h0["shape"]) == [1, 30, 16]  # cut on dim 0, its layers: the whole batch's hidden state


def test_only_recorded_batches_can_be_drawn():
    trace = record(RunConfig(gpus=2))
    with pytest.raises(ValueError, match="batches 0, 3 only"):
        inputs_figure(trace, 1)
    with pytest.raises(ValueError, match="records no arguments"):
        inputs_figure(dataclasses.replace(trace, arguments=[]))

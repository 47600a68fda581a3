"""Inputs view: what each GPU received of each argument, read back from the figure's own data."""
import dataclasses

import pytest
import torch

from dpviz import RunConfig, record
from dpviz.engines.dp.read.inputs import prepare_inputs
from dpviz.figures import inputs_figure
from dpviz.figures.colors import DEVICE_COLORS, IDLE_GREY, MISSING, contrast_ratio, device_color, device_pattern
from dpviz.engines.dp.read.inputs import CELL, MODE_WORDS
from dpviz.presets import PRESETS


def cells(fig):
    """{(argument, GPU column): text} from the cells, drawn as one bar each (the text on two short lines)."""
    names = list(fig.layout.yaxis.ticktext)
    out = {}
    for t in fig.data:
        for x, base, text in zip(t.x, t.base, t.text):
            out[(names[round(base + CELL / 2)], x)] = text.replace("<br>", ", ")
    return out


def each(value, n: int) -> list:
    """A marker's per-cell value: one for every cell where the trace sets one for them all."""
    return [value] * n if value is None or isinstance(value, str) else list(value)


def fills(fig):
    """{(argument, GPU column): (colour, hatch)} of the cells."""
    names = list(fig.layout.yaxis.ticktext)
    return {(names[round(b + CELL / 2)], x): (c, h or "") for t in fig.data
            for x, b, c, h in zip(t.x, t.base, each(t.marker.color, len(t.x)), each(t.marker.pattern.shape, len(t.x)))}


def test_a_hatch_is_drawn_in_the_ink_asked_for_and_never_takes_from_its_labels_contrast():
    # plotly draws a hatch in the colour asked for only on a bar trace of one fill colour: given a list of fills it
    # picks its own ink. 16 GPUs hatch GPUs 8-15; the keyword pitfall hatches the replicas called without x.
    for fig in (inputs_figure(record(RunConfig(gpus=16)), 0), inputs_figure(*_last(PRESETS["kwargs-small-batch"]))):
        hatched = [t for t in fig.data if t.marker.pattern.shape]
        assert hatched
        for t in hatched:
            assert isinstance(t.marker.color, str) and isinstance(t.marker.pattern.shape, str), t.name
            assert isinstance(t.marker.pattern.fgcolor, str), t.name
            for ink in each(t.insidetextfont.color, len(t.x)):
                assert contrast_ratio(ink, t.marker.color) >= 4.5, (t.name, ink, t.marker.color)
                # any blend of the fill and the hatch contrasts with the label as the fill does, or more
                assert contrast_ratio(ink, t.marker.pattern.fgcolor) >= contrast_ratio(ink, t.marker.color), t.name
        assert sum(t.showlegend is not False for t in fig.data) == len({t.name for t in fig.data})  # a legend entry a kind


def _last(preset):
    trace = record(preset.config)
    return trace, trace.failure.batch


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
    assert cells(fig)[("x", "5 ✗")] == "missing" and cells(fig)[("x", "0")] == "2 × 5"  # 8 GPUs: numbered columns
    assert list(fig.layout.xaxis.categoryarray) == [str(d) for d in range(5)] + ["5 ✗", "6", "7"]  # GPU 5 raised
    assert {t.name for t in fig.data} == {MODE_WORDS[m] for m in ("split", "shared", "missing")}
    subtitle = fig.layout.title.subtitle.text
    assert "called without x" in subtitle and "✗ GPU 5 raised TypeError" in subtitle
    colours = fills(fig)
    assert colours[("x", "5 ✗")] == (MISSING, "x") and colours[("x", "3")] == (device_color(3), "")
    assert MISSING not in DEVICE_COLORS and MISSING != IDLE_GREY
    assert fig.layout.plot_bgcolor is None  # the page's theme paints the background


def test_a_python_list_reaches_every_replica_whole():
    trace = record(RunConfig(model="cnn", inputs="list", gpus=3, data_size=20, batch_size=10))
    table = prepare_inputs(trace, 0)
    ids = table[table["argument"] == "row_ids"]
    assert set(ids["mode"]) == {"copied"} and [list(s) for s in ids["shape"]] == [[10]] * 3
    x = table[table["argument"] == "x"]
    assert [list(s) for s in x["shape"]] == [list(c.shape) for c in torch.empty(10, 1, 5, 5).chunk(3)]
    assert cells(inputs_figure(trace, 0))[("row_ids", "GPU 2")] == "list of 10, whole"


def test_sixteen_gpus_fill_chunks_in_their_colours_hatched_past_eight():
    trace = record(RunConfig(gpus=16))
    fig = inputs_figure(trace, 0)
    colours = fills(fig)
    rows = torch.empty(trace.batches[0].rows, 5).chunk(16)
    assert [cells(fig)[("x", str(d))] for d in range(len(rows))] == [" × ".join(map(str, c.shape)) for c in rows]
    for d in range(len(rows)):
        assert colours[("x", str(d))] == (device_color(d), device_pattern(d))
    assert {colours[("x", str(d))] for d in range(len(rows), 16)} == {(IDLE_GREY, "")}
    assert fig.layout.xaxis.title.text == "GPU"


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

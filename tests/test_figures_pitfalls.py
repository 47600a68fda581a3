"""Pitfall figures: each pitfall preset draws its own, with numbers recomputed by torch; other runs draw none."""
import pytest
import torch
import torch.nn.functional as F

from dpviz import RunConfig, record
from dpviz.engines.dp.read.pitfall_hidden import DID, MEANT, prepare_hidden
from dpviz.engines.dp.read.pitfall_loss import prepare_losses
from dpviz.engines.dp.read.pitfall_state import prepare_state
from dpviz.engines.dp.read.pitfalls import pitfall_figure
from dpviz.presets import PRESETS
from dpviz.engines.workload.tutorial_data import build, call
from figure_traces import recorded


@pytest.fixture(scope="module")
def runs():
    return {name: record(PRESETS[name].config) for name in ("rnn-hidden-dim", "scalar-loss", "state-lost")}


def test_runs_without_a_drawn_pitfall_draw_none():
    assert pitfall_figure(recorded(gpus=3)) is None
    assert pitfall_figure(recorded(gpus=3, train=True)) is None
    assert pitfall_figure(record(PRESETS["idle-gpus"].config)) is None
    assert pitfall_figure(record(RunConfig(model="gru_dim1", inputs="hidden", gpus=2))) is None  # h0 cut on its batch dim
    assert pitfall_figure(record(RunConfig(model="counter", gpus=1))) is None  # one device: state keeps


def _segments(table, panel, tensor):
    part = table[(table["panel"] == panel) & (table["tensor"] == tensor)]
    return [(int(d), int(a), int(b)) for d, a, b in zip(part["device"], part["start"], part["stop"])]


def test_h0_is_drawn_cut_on_its_layers_against_the_cut_on_its_batch(runs):
    trace = runs["rnn-hidden-dim"]
    table = prepare_hidden(trace)
    rows, gpus = trace.batches[0].rows, len(trace.lanes)
    h0 = torch.empty(table.attrs["shape"])
    assert list(h0.shape) == [1, rows, 16]  # (layers, batch, hidden)
    did = h0.chunk(gpus, dim=0)  # DataParallel's cut: one piece
    assert [list(s) for s in table.loc[(table["panel"] == DID) & table["tensor"].str.startswith("h0"), "shape"]] \
        == [list(p.shape) for p in did]
    assert _segments(table, DID, "h0") == [(0, 0, rows)]  # GPU 0 got every row of h0
    x = torch.empty(rows, 6, 5).chunk(gpus)
    assert _segments(table, DID, "x") == [(0, 0, len(x[0])), (-1, len(x[0]), rows)]  # x's second chunk: no replica
    meant = h0.chunk(gpus, dim=1)
    bounds = torch.tensor([0] + [p.shape[1] for p in meant]).cumsum(0).tolist()
    assert _segments(table, MEANT, "h0") == [(d, bounds[d], bounds[d + 1]) for d in range(gpus)]
    assert _segments(table, MEANT, "x") == _segments(table, MEANT, "h0")
    fig = pitfall_figure(trace)
    assert "1 piece, so 1 replica for 2 GPUs" in fig.layout.title.text
    assert any("✗ raised" in (t.text[0] or "") for t in fig.data)


def test_the_gathered_losses_and_both_means_equal_torch(runs):
    trace = runs["scalar-loss"]
    model, loader = build(trace.config)
    table, means = prepare_losses(trace)
    assert list(means["batch"]) == [0, 3]
    core = model.core if hasattr(model, "core") else model
    for index, (data, ids) in enumerate(loader):
        if index not in (0, 3):
            continue
        (x,), _ = call(trace.config, data, ids.tolist())
        chunks = x.chunk(len(trace.lanes))
        with torch.no_grad():
            per_gpu = [float(F.mse_loss(core.fc(c), core.teacher(c))) for c in chunks]
            whole = float(torch.nn.MSELoss()(core.fc(x), core.teacher(x)))
        part = table[table["batch"] == index]
        assert list(part["rows"]) == [len(c) for c in chunks]
        assert list(part["loss"]) == pytest.approx(per_gpu, rel=1e-5)
        m = means[means["batch"] == index].iloc[0]
        assert m.mean_of_gathered == pytest.approx(sum(per_gpu) / len(per_gpu), rel=1e-5)
        assert m.whole == pytest.approx(whole, rel=1e-5) and m.row_weighted == pytest.approx(whole, rel=1e-5)
    last = means.iloc[-1]
    assert abs(last.mean_of_gathered - last.whole) > 0.01  # 4, 4, 2 rows: the bias the figure is about
    fig = pitfall_figure(trace)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [float(t.width[0]) for t in bars] == [10, 10, 10, 4, 4, 2]  # a bar as wide as its chunk
    lines = {(t.name, round(t.y[0], 6)) for t in fig.data if t.type == "scatter"}
    assert (next(n for n, _ in lines if n.startswith("loss over all rows")), round(last.whole, 6)) in lines


def test_state_counters_per_replica_against_the_models(runs):
    trace = runs["state-lost"]
    table = prepare_state(trace).set_index("kind")
    state = trace.facts["state"]
    replicas = table.loc["replicas"]
    batches = len(trace.batches)
    chunks = [torch.empty(b.rows).chunk(len(trace.lanes)) for b in trace.batches]
    assert list(replicas["calls"]) == [batches] * len(trace.lanes)  # one call per batch, each on a new replica
    assert list(replicas["rows_seen"]) == [sum(len(c[d]) for c in chunks) for d in range(len(trace.lanes))]
    assert table.loc["kept", "calls"] == state["calls"][0] == 0
    assert table.loc["kept", "rows_seen"] == state["rows_seen"][0] == replicas["rows_seen"].iloc[0]  # GPU 0's, shared
    assert table.loc["one device", "calls"] == state["calls"][1] == batches
    assert table.loc["one device", "rows_seen"] == state["rows_seen"][1] == replicas["rows_seen"].sum()
    fig = pitfall_figure(trace)
    drawn = {(t.y[0], t.xaxis): t.x[0] for t in fig.data}
    assert drawn[("the model, after", "x")] == 0 and drawn[("the model, after", "x2")] == state["rows_seen"][0]


def test_on_a_projector_every_row_of_the_state_pitfall_keeps_its_name_and_its_value(runs):
    # Presenting laid the four rows a panel out tighter than plotly names them at the larger type: "GPU 1's replicas"
    # and "on one device" went unnamed, and every value beside its bar was hidden (the lesson's 0 among them).
    from dpviz.figures.presenting import presentation, tick_room_px

    fig = pitfall_figure(runs["state-lost"])
    shown = presentation(fig, room_px=595)  # the room the preset's page leaves under its banner
    plot = shown.layout.height - shown.layout.margin.t - shown.layout.margin.b
    rows = {t.yaxis: set() for t in shown.data}
    for t in shown.data:
        rows[t.yaxis].add(t.y[0])
    for name in ("yaxis", "yaxis2"):
        assert shown.layout[name].dtick == 1  # every category named, none left to plotly's spacing
    assert all(len(names) == 4 for names in rows.values())
    assert tick_room_px(shown, plot) <= plot + 1  # and room for each name at the larger type
    assert shown.layout.uniformtext.mode != "hide"  # values beside their bars are never hidden for want of room


@pytest.mark.parametrize("name", list(PRESETS) + ["plain", "one-device-loss"])
def test_the_page_asks_whether_a_run_has_a_pitfall_without_drawing_it_and_gets_the_same_answer(name):
    from dpviz.figures.views import has_pitfall

    config = {"plain": RunConfig(gpus=3), "one-device-loss": RunConfig(model="loss", gpus=1)}.get(name)
    trace = record(config or PRESETS[name].config)
    assert has_pitfall(trace) == (pitfall_figure(trace) is not None)

"""Memory by kind and bytes per step, engine beside engine (dpviz.analysis.memory_compare and its figure), from
real runs of 2 ranks (gloo processes) and 2 simulated GPUs at the same tiny settings, with torch as the oracle:
each rank's parameters are its tensors' bytes (FSDP: its dim-0 shard of each, padded), its optimizer state what
torch's Adam keeps for the parameters it steps, and the bytes sent are the ring formulas of the model's bytes."""
from __future__ import annotations

from functools import cache

import pytest
import torch

from dpviz.analysis.memory_compare import FAMILIES, bytes_per_step, memory_by_kind, reading, state_title
from dpviz.analysis.traffic import counted_step
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.workload import tutorial_data as tutorial
from dpviz.figures.memory_compare import COMPUTED, bytes_per_step_figure, memory_compare_figure
from dpviz.figures.presenting import presentation
from dpviz.trace import json_io as trace_json

RANKS = 2
SETTINGS = dict(gpus=RANKS, train=True, batch_size=8, data_size=16)
ENGINES = ("ddp", "zero1", "fsdp")


@cache
def recorded(name: str):
    trace = engine(name).record(RunConfig(engine=name, **SETTINGS, optimizer="adam"))
    assert trace.failure is None
    return trace_json.loads(trace_json.dumps(trace))


def model_parameters() -> list[torch.Tensor]:
    return [p.detach() for p in tutorial.build(RunConfig(engine="ddp", **SETTINGS))[0].parameters()]


def adam_state_bytes(parameters: list[torch.Tensor]) -> int:
    """What torch's Adam keeps for `parameters` after a step, per element of a parameter: its two moments (its step
    counters, one number per parameter tensor, are left out by every engine's count alike)."""
    copies = [torch.nn.Parameter(p.clone()) for p in parameters]
    for p in copies:
        p.grad = torch.ones_like(p)
    optimizer = torch.optim.Adam(copies)
    optimizer.step()
    return sum(v.numel() * v.element_size() for state in optimizer.state.values() for v in state.values()
               if isinstance(v, torch.Tensor) and v.dim() > 0)


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_ddp_ranks_hold_everything_and_zero1_splits_the_optimizer_state_by_whole_parameters():
    parameters = model_parameters()
    names = [n for n, _ in tutorial.build(RunConfig(engine="ddp", **SETTINGS))[0].named_parameters()]
    named = dict(zip(names, parameters))
    for name in ("ddp", "zero1"):
        trace = recorded(name)
        lanes = memory_by_kind(trace)
        assert [m.lane for m in lanes] == ["rank 0", "rank 1"] and lanes[0].engine == trace.spec.short
        for rank, lane in enumerate(lanes):
            assert lane.kinds["parameters"] == lane.kinds["gradients"] == nbytes(parameters)
            assert lane.kinds["communication buffers"] == nbytes(parameters)  # DDP's buckets: every gradient
            stepped = [named[n] for n, _ in trace.facts["held"][rank]["owns"]]  # ZeroRedundancyOptimizer's partition
            assert lane.kinds["optimizer state"] == adam_state_bytes(stepped)
        states = [lane.kinds["optimizer state"] for lane in lanes]
        if name == "ddp":
            assert states[0] == states[1] == adam_state_bytes(parameters)
        else:  # the weight on one rank, the bias on the other: together one copy, split unevenly
            assert sum(states) == adam_state_bytes(parameters) and states[0] != states[1]


def test_fsdp_ranks_hold_their_chunk_of_every_parameter():
    trace = recorded("fsdp")
    parameters = model_parameters()
    for rank, lane in enumerate(memory_by_kind(trace)):
        shard = [p.chunk(RANKS)[rank] if rank < len(p.chunk(RANKS)) else p[:0] for p in parameters]
        # Every rank allocates ceil(rows / ranks) rows of each parameter, its real rows or padding.
        padded = sum(-(-p.shape[0] // RANKS) * p[0].numel() * p.element_size() for p in parameters)
        assert lane.kinds["parameters"] == padded
        assert lane.kinds["optimizer state"] == adam_state_bytes(shard)
        assert list(lane.kinds) == [k for k in FAMILIES if k in lane.kinds]  # in the figure's order


def test_the_measured_bytes_are_what_the_ranks_handed_and_the_computed_ones_the_ring_formulas():
    model = nbytes(model_parameters())
    share = (RANKS - 1) / RANKS
    formula = {"ddp": 2 * share * model, "zero1": 3 * share * model, "fsdp": 3 * share * model}
    for name in ENGINES:
        trace = recorded(name)
        step = counted_step(trace)  # one whole step, the one every comparison reads
        for lane, moved in zip(bytes_per_step(trace), trace.facts["moved"]):
            assert lane.total == sum(row[3] for row in moved if row[0] == step)
            assert lane.computed == pytest.approx(formula[name])
    ddp, fsdp = bytes_per_step(recorded("ddp"))[0], bytes_per_step(recorded("fsdp"))[0]
    assert fsdp.computed / ddp.computed == pytest.approx(1.5)
    assert set(fsdp.measured) == {"all-gather (forward)", "all-gather (backward)", "reduce-scatter"}


def test_dataparallel_is_put_in_the_same_terms():
    trace = recorded("dp")
    lanes = memory_by_kind(trace)
    assert [m.lane for m in lanes] == ["GPU 0", "GPU 1"]
    assert set(lanes[0].kinds) <= set(FAMILIES)
    assert lanes[0].kinds.get("optimizer state", 0) > 0 and lanes[1].kinds.get("optimizer state", 0) == 0
    assert all(not lane.measured and lane.computed is not None for lane in bytes_per_step(trace))


def test_the_figures_draw_memory_and_bytes_from_the_runs():
    traces = [recorded(name) for name in ("dp", *ENGINES)]
    fig, bytes_fig = memory_compare_figure(traces), bytes_per_step_figure(traces)
    memory = {t.name: t for t in fig.data if t.type == "bar"}
    moved = {t.name: t for t in bytes_fig.data if t.type == "bar"}
    assert set(memory) <= set(FAMILIES) and not set(moved) & set(FAMILIES)  # each chart its own kind of bars
    positions = list(zip(*fig.data[0].x))
    assert positions[2:] == [(e, str(r)) for e in ("DDP", "ZeRO-1", "FSDP") for r in range(RANKS)]
    assert [c[2] for c in fig.data[0].customdata][2:] == [f"{e} rank {r}" for e in ("DDP", "ZeRO-1", "FSDP")
                                                         for r in range(RANKS)]  # the hover names the device whole
    expected = [lane for t in traces for lane in memory_by_kind(t)]
    for family, bars in memory.items():
        assert list(bars.y) == [float(lane.kinds.get(family, 0)) for lane in expected]
    assert {"all-reduce", "broadcast", "reduce-scatter"} <= set(moved)
    diamonds = next(t for t in bytes_fig.data if t.name == COMPUTED)
    assert list(diamonds.x[0]) == list(fig.data[0].x[0]) and list(diamonds.x[1]) == list(fig.data[0].x[1])  # device by device
    assert list(diamonds.y) == [lane.computed for t in traces for lane in bytes_per_step(t)]
    assert fig.layout.title.text.replace("<br />", " ").startswith(state_title(traces)[:20])
    assert "1.5× DDP's" in reading(traces)
    assert fig.layout.paper_bgcolor is None and fig.layout.plot_bgcolor is None  # the page's theme decides
    shown = presentation(fig)  # Presenting: larger type, the legend still beside the panels
    assert shown.layout.title.font.size > fig.layout.title.font.size and shown.layout.legend.x == fig.layout.legend.x


@pytest.mark.parametrize("figure", [memory_compare_figure, bytes_per_step_figure])
def test_the_legend_sits_under_the_plot_and_leaves_it_the_charts_width(figure):
    """Beside the plot, the legend left it 160 px of a 440 px chart: the engines' names ran together. Under it, in a
    bottom margin made for its rows at the narrowest chart."""
    from dpviz.figures.memory_compare import UNDER_AXIS_PX
    from dpviz.figures.legends import legend_rows
    from dpviz.figures.sizes import LEGEND_ROW_PX

    fig = figure([recorded(name) for name in ("dp", *ENGINES)])
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.y < 0 and legend.yanchor == "top" and legend.x == 0
    assert fig.layout.margin.b >= UNDER_AXIS_PX + legend_rows([t.name for t in fig.data]) * LEGEND_ROW_PX
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert -legend.y * plot_px == pytest.approx(UNDER_AXIS_PX)  # under both rows of names: devices, engines
    shown = presentation(fig)  # the legend's type and its gap under the names grown, its margin laid out again
    shown_px = shown.layout.height - shown.layout.margin.t - shown.layout.margin.b
    assert shown.layout.legend.font.size > fig.layout.legend.font.size
    assert UNDER_AXIS_PX < -shown.layout.legend.y * shown_px < shown.layout.margin.b - LEGEND_ROW_PX


def test_the_figure_refuses_no_runs():
    for figure in (memory_compare_figure, bytes_per_step_figure):
        with pytest.raises(ValueError, match="at least one run"):
            figure([])


def test_the_compare_bars_and_the_diamonds_count_the_same_bytes_sent():
    """One trace, two figures: each DataParallel GPU's and DDP rank's bar on the Both page's Compare figure reads the
    bytes its diamond reads on this page's, both what the device sends per step (DDP's rank 0 its buffers too)."""
    import dataclasses

    from dpviz.figures.compare import comparison_figure

    units = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
    # bytes in one unit of an axis, the unit its title ends with: "per step (KiB)"; plain bytes where it names none
    unit = lambda fig, axis: units.get(fig.layout[axis].title.text.rsplit("(", 1)[-1].rstrip(")"), 1)
    buffers = dict(SETTINGS, model="mlp")  # BatchNorm's buffers: rank 0 broadcasts them before each forward
    for settings in (SETTINGS, buffers):
        dp, ddp = (engine(name).record(RunConfig(engine=name, **settings)) for name in ("dp", "ddp"))
        compare, every = comparison_figure(dp, ddp), bytes_per_step_figure([dp, ddp])
        bars: dict[tuple[str, str], float] = {}
        for bar in compare.data:
            if bar.type == "bar":
                engine_name = "DataParallel" if bar.xaxis == "x" else "DDP"
                for device, height in zip(bar.x, bar.y):
                    key = (engine_name, device.split()[-1])
                    bars[key] = bars.get(key, 0) + height * unit(compare, "yaxis")
        diamonds = next(t for t in every.data if t.name == COMPUTED)
        sent = {(e, d): y * unit(every, "yaxis") for e, d, y in zip(*diamonds.x, diamonds.y)}
        assert {k: v for k, v in sent.items() if v} == pytest.approx(bars), settings
        if settings is buffers:
            assert sent[("DDP", "0")] > sent[("DDP", "1")] > 0  # rank 0 sends the buffers as well
    assert "sent per step" in compare.layout.yaxis.title.text and "sends" in diamonds.hovertemplate
    assert all("sent per step" in bar.hovertemplate for bar in compare.data if bar.type == "bar")


def test_every_engines_model_state_per_device_is_torchs_at_the_end_of_the_last_whole_step():
    """Like with like: every device of every engine read at the end of the same, last whole step, after Adam's step
    and before the gradients are zeroed: parameters, gradients and Adam's state the bytes of torch's own tensors.
    DataParallel's GPU 0 holds the only parameters, their summed gradients and all of Adam's state; its replica a
    copy of the parameters made and freed within the step (at its peak), and neither of the others. DDP's ranks hold it all; ZeRO-1's Adam's state of the parameters each owns; FSDP's each its shard."""
    from dpviz.analysis.memory_compare import moment_step
    from dpviz.analysis.opening_step import last_whole_step

    parameters = model_parameters()
    names = [n for n, _ in tutorial.build(RunConfig(engine="ddp", **SETTINGS))[0].named_parameters()]
    whole, padded = nbytes(parameters), sum(-(-p.shape[0] // RANKS) * p[0].numel() * p.element_size() for p in parameters)
    for name in ("dp", *ENGINES):
        trace = recorded(name)
        step = moment_step(trace)
        assert step == last_whole_step(trace) == len(trace.batches) - 1, name  # 16 rows in batches of 8: both whole
        lanes = memory_by_kind(trace)
        assert len(lanes) == RANKS and all(f"{trace.spec.unit} {step + 1} of" in lane.moment for lane in lanes)
        # Every device read at one moment, after the optimizer's step (DataParallel's replica too, which never steps:
        # it was labelled by its own last phase, "after backward (×)", the timeline's hatch hint and all)
        assert all(f"(after {trace.vocabulary.phase('step').label})" in lane.moment for lane in lanes), name
        assert len({lane.moment for lane in lanes}) == 1, name
        for rank, lane in enumerate(lanes):
            state = lambda kind: lane.kinds.get(kind, 0)
            if name == "dp":
                # A replica: the module's copy replicate makes each step, at its peak in it; no gradients, no state
                expected = (whole, whole, adam_state_bytes(parameters)) if rank == 0 else (whole, 0, 0)
            elif name == "fsdp":
                shard = [p.chunk(RANKS)[rank] if rank < len(p.chunk(RANKS)) else p[:0] for p in parameters]
                expected = (padded, padded, adam_state_bytes(shard))
            else:
                owned = dict(zip(names, parameters))
                stepped = [owned[n] for n, _ in trace.facts["held"][rank]["owns"]]
                expected = (whole, whole, adam_state_bytes(stepped))
            assert (state("parameters"), state("gradients"), state("optimizer state")) == expected, (name, rank, lane.kinds)


def test_in_presenting_the_memory_chart_fits_a_projectors_first_screen_and_bytes_have_their_own():
    """The lesson, each device's memory by kind, is a chart of its own, no taller in Presenting than the room under
    a projector's page heading (the bytes per step, under it on the page, once ran it 300 px past the fold); its
    type stays the house's, grown."""
    from dpviz.figures.sizes import PROJECTOR_ROOM_PX, TITLE_SIZE

    traces = [recorded(name) for name in ("dp", *ENGINES)]
    fig = memory_compare_figure(traces)
    shown = presentation(fig)
    assert shown.layout.height <= PROJECTOR_ROOM_PX, shown.layout.height
    assert shown.layout.title.font.size > TITLE_SIZE
    assert COMPUTED not in {t.name for t in fig.data} and COMPUTED in {t.name for t in bytes_per_step_figure(traces).data}
    assert all(t.type == "bar" for t in fig.data) and len(fig.data) >= 4  # parameters, gradients, Adam's state, activations


MIN_SHARE = 0.2  # of its panel's axis: the least the fullest device of any engine fills with model state


@cache
def at_four_with_adam(name: str):
    settings = dict(gpus=4, train=True, batch_size=16, data_size=32, optimizer="adam", model="ffn")
    trace = engine(name).record(RunConfig(engine=name, **settings))
    assert trace.failure is None
    return trace_json.loads(trace_json.dumps(trace))


def test_the_model_state_has_a_panel_of_its_own_where_every_engine_reads_and_it_halves_as_torch_says():
    """Beside a step's activations the model state was drawn in slivers. It has a panel of its own now, on its own
    scale: every engine's fullest device fills at least MIN_SHARE of it, and what it draws is what torch holds with
    Adam on N = 4 devices, P the bytes of the model's parameters: DDP 4P a rank (parameters, gradients, two moments),
    ZeRO-1 2P a rank and the moments' 2P split over the ranks (by whole parameters: about 2P/N each), FSDP 4P over
    the ranks (each its padded rows of every parameter). One trace a kind, over (engine, device)."""
    from dpviz.analysis.memory_compare import MODEL_STATE
    from dpviz.figures.memory_compare import PEAK_PANEL, STATE_PANEL
    from dpviz.figures.text_fit import unwrap

    names = ("dp", "ddp", "zero1", "fsdp")
    traces = [at_four_with_adam(name) for name in names]
    fig = memory_compare_figure(traces)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len({t.name for t in bars}) == len(bars)  # one trace a kind
    state = [t for t in bars if t.name in MODEL_STATE]
    assert {t.name for t in state} == set(MODEL_STATE) and {t.yaxis for t in state} == {"y"}
    assert {t.yaxis for t in bars if t.name not in MODEL_STATE} == {"y2"} and "activations" in {t.name for t in bars}
    assert [unwrap(a.text) for a in fig.layout.annotations][:2] == [STATE_PANEL, PEAK_PANEL]
    units = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2}
    unit = units[fig.layout.yaxis.title.text.rsplit("(", 1)[1].rstrip(")")]
    assert fig.layout.yaxis.title.text.startswith("held (")  # words with the unit, not the unit alone
    positions = list(zip(*state[0].x))
    held = {position: sum(t.y[i] for t in state) * unit for i, position in enumerate(positions)}
    axis_top = fig.layout.yaxis.range[1] * unit
    for label in ("DataParallel", "DDP", "ZeRO-1", "FSDP"):
        fullest = max(amount for (engine_label, _), amount in held.items() if engine_label == label)
        assert fullest >= MIN_SHARE * axis_top, (label, fullest, axis_top)
    ranks = 4
    parameters = [p.detach() for p in tutorial.build(RunConfig(engine="ddp", model="ffn"))[0].parameters()]
    p = nbytes(parameters)
    adam = adam_state_bytes(parameters)
    assert adam == 2 * p
    lanes = lambda label: [amount for (engine_label, _), amount in held.items() if engine_label == label]
    assert lanes("DDP") == pytest.approx([4 * p] * ranks)
    zero1 = lanes("ZeRO-1")
    assert sum(zero1) == pytest.approx(ranks * 2 * p + adam)  # every rank's parameters and gradients, one set of moments
    assert all(2 * p <= amount <= 2 * p + adam for amount in zero1)
    padded = sum(-(-t.shape[0] // ranks) * t[0].numel() * t.element_size() for t in parameters)
    shard = lambda r: [t.chunk(ranks)[r] if r < len(t.chunk(ranks)) else t[:0] for t in parameters]
    assert lanes("FSDP") == pytest.approx([2 * padded + adam_state_bytes(shard(r)) for r in range(ranks)])
    assert max(lanes("FSDP")) < min(zero1) and max(zero1) < min(lanes("DDP"))  # the lesson: it falls, engine by engine
    assert lanes("DataParallel")[0] == pytest.approx(4 * p)  # GPU 0 holds it all, as a DDP rank does


@pytest.mark.parametrize("train", [False, True], ids=["forward only", "trained"])
def test_on_a_projector_the_model_state_panel_takes_the_larger_share(train):
    """The lesson is the model's state halving from DDP to ZeRO-1 to FSDP: in Presenting at 1024 × 768, under the
    page's heading (and a forward-only run's box), its panel was 64 px to the activations' 46. Now at least twice
    the lower panel, which still holds its bars and its one tick (its label's line), and the whole chart still fits
    the room the page leaves it."""
    import math

    from dpviz.figures.sizes import LINE_EM, TICK_SIZE
    from dpviz.figures.text_fit import text_px
    from dpviz.page import room

    box = ("Forward only: no gradients, no optimizer state, no all-reduce. Turn on Train (and choose Adam as the "
           "optimizer, which every engine here then steps) to see what ZeRO-1 and FSDP shard.")  # dpviz.page.memory's
    lines = math.ceil(text_px(box, room.NOTICE_SIZE) / room.NOTICE_ROOM_PX)
    above = 0 if train else room.NOTICE_PX + lines * room.NOTICE_LINE_PX
    room_px = room.SCREEN_PX - room.PAGE_TOP_PX - room.SLACK_PX - above  # room.left_px() on that page
    traces = [engine(name).record(RunConfig(engine=name, gpus=RANKS, train=train)) for name in ("dp", *ENGINES)]
    shown = presentation(memory_compare_figure(traces), room_px=room_px)
    layout = shown.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    state, peak = ((layout[a].domain[1] - layout[a].domain[0]) * plot_px for a in ("yaxis", "yaxis2"))
    assert state >= 2 * peak, (state, peak)
    assert peak >= 1.35 * TICK_SIZE * LINE_EM and len(layout.yaxis2.tickvals) == 1
    assert layout.height <= room_px + room.SLACK_PX  # the whole chart on the first screen

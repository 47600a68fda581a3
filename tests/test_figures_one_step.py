"""One step, every engine, one layout: the same columns for DataParallel, DDP, ZeRO-1, FSDP and a pipeline, the
moves each really makes, and bytes on each arrow that torch gives for the same model and batch.

Every trace is a real run (simulated GPUs for DataParallel, gloo processes for the others) of the MLP at the same
settings: 4 devices, training, SGD. The oracles are torch's: torch.chunk for DataParallel's scatter, the model's own
parameters for what is copied, all-reduced and broadcast, FSDP2's padding of dim 0 to a multiple of the ranks, the
model's layers run on the batch for a pipeline's activations.
"""
from __future__ import annotations

import functools
import math
import re

import pytest
import torch

from dpviz.analysis.one_step import COLUMNS, HUB, OneStep
from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.workload.models import build_model
from dpviz.figures.one_step import BOX_LEFT, BOX_RIGHT, CELL_SIZE, short_bytes
from dpviz.figures.presenting import presentation
from dpviz.figures.presenting_boxes import CELL_LINES, MORE, box_key
from dpviz.figures.sizes import PROJECTOR_PX
from dpviz.figures.text_fit import text_px
from dpviz.figures.views import one_step_any, views_of

ENGINES = ("dp", "ddp", "zero1", "fsdp", "pipeline")
SETTINGS = dict(gpus=4, train=True, model="mlp", batch_size=32, data_size=128, input_size=5, output_size=2)
MOVES = {  # what each engine moves in a training step, column by column
    "dp": {("input", "scatter"), ("forward", "replicate"), ("forward", "gather"), ("backward", "output grad"),
           ("backward", "grad sum")},
    "ddp": {("forward", "buffers"), ("backward", "all-reduce")},  # the MLP's BatchNorm buffers, from rank 0
    "zero1": {("forward", "buffers"), ("backward", "all-reduce"), ("update", "broadcast")},
    "fsdp": {("forward", "all-gather"), ("backward", "all-gather"), ("backward", "reduce-scatter")},
    "pipeline": {("forward", "activations"), ("backward", "gradients")},
}


@functools.cache
def trace_of(name: str):
    extra = {"microbatches": 4} if name == "pipeline" else {}
    return engine(name).record(RunConfig(engine=name, **SETTINGS, **extra))


READERS = {"dp": "dpviz.engines.dp.read.one_step:one_step_dp", "ddp": "dpviz.engines.ddp.read.one_step:one_step_ddp",
           "zero1": "dpviz.engines.ddp.read.one_step:one_step_ddp", "fsdp": "dpviz.engines.fsdp.read.one_step:one_step_fsdp",
           "pipeline": "dpviz.engines.pipeline.read.one_step:one_step_pipeline"}


def read(name: str, trace, step: int = 0) -> OneStep:
    module, function = READERS[name].split(":")
    return getattr(__import__(module, fromlist=[function]), function)(trace, step)


@functools.cache
def picture(name: str) -> OneStep:
    return read(name, trace_of(name))


def model_bytes(*kinds: str) -> int:
    model, _ = build_model("mlp", SETTINGS["input_size"], SETTINGS["output_size"])
    tensors = [*model.parameters()] + ([*model.buffers()] if "buffers" in kinds else [])
    return sum(t.numel() * t.element_size() for t in tensors)  # BatchNorm's int64 counter too: replicate copies it


def arrow(name: str, column: str, label: str):
    return next(a for a in picture(name).arrows if (a.column, a.name) == (column, label))


@pytest.mark.parametrize("name", ENGINES)
def test_every_engine_opens_on_one_step_in_the_same_columns(name):
    trace = trace_of(name)
    shown = [view.key for view in views_of(trace) if view.shows(trace)]
    # every engine's One step comes first but a pipeline's, whose lesson is its Schedule (One step then follows)
    assert shown[0] == ("grid" if name == "pipeline" else "one_step") and "one_step" in shown[:2], shown
    fig = one_step_any(trace, 0)
    headings = [a.text.split("<br>")[0] for a in fig.layout.annotations if a.name == "column"]
    assert headings == [f"<b>{title}</b>" for _, title in COLUMNS]
    assert [a.x for a in fig.layout.annotations if a.name == "column"] == [
        c + (BOX_LEFT + BOX_RIGHT) / 2 for c in range(len(COLUMNS))]
    assert list(fig.layout.yaxis.ticktext) == [trace.vocabulary.lane_name(lane.id) for lane in trace.lanes]


@pytest.mark.parametrize("name", ENGINES)
def test_each_engine_draws_the_moves_it_makes_and_no_other(name):
    drawn = {(a.column, a.name) for a in picture(name).arrows}
    assert drawn == MOVES[name]
    fig = one_step_any(trace_of(name), 0)
    assert [a for a in fig.layout.annotations if a.name == "arrow"]
    # Every device that takes part in a move says its bytes where the arrow ends, in its box of that column.
    cells = {(round(a.x - (BOX_LEFT + BOX_RIGHT) / 2), round(a.y)): a.text for a in fig.layout.annotations if a.name == "cell"}
    for move in picture(name).arrows:
        column = [key for key, _ in COLUMNS].index(move.column)
        for lane in move.lanes:
            size = move.sent.get(lane) or move.received.get(lane)
            assert f"{short_bytes(size)}" in cells[(column, lane)], (move.name, lane, cells[(column, lane)])


def test_dataparallel_scatters_torch_chunks_and_copies_the_whole_model_to_each_replica():
    trace, rows = trace_of("dp"), trace_of("dp").batches[0].rows
    chunks = [len(c) for c in torch.chunk(torch.arange(rows), SETTINGS["gpus"])]
    row = SETTINGS["input_size"] * 4
    scatter = arrow("dp", "input", "scatter")
    assert scatter.received == {lane: n * row for lane, n in enumerate(chunks) if lane > 0}  # chunk 0 stays on GPU 0
    assert scatter.sent == {0: sum(n * row for n in chunks[1:])}
    replicate = arrow("dp", "forward", "replicate")
    assert set(replicate.received.values()) == {model_bytes("parameters", "buffers")}
    summed = arrow("dp", "backward", "grad sum")  # every replica's gradients, into GPU 0
    assert set(summed.sent.values()) == {model_bytes("parameters")} and summed.received == {0: 3 * model_bytes("parameters")}
    assert picture("dp").cells[(1, "update")].idle and not picture("dp").cells[(0, "update")].idle
    assert trace.output_device == 0


def test_ddp_all_reduces_every_gradient_and_zero1_broadcasts_each_ranks_own_parameters():
    for name in ("ddp", "zero1"):
        reduce = arrow(name, "backward", "all-reduce")
        assert reduce.sent == {rank: model_bytes("parameters") for rank in range(4)}, name
        assert reduce.shape != HUB
    broadcast = arrow("zero1", "update", "broadcast")
    assert sum(broadcast.sent.values()) == model_bytes("parameters")  # each parameter from its one owner
    assert min(broadcast.sent.values()) > 0
    assert broadcast.received == {rank: model_bytes("parameters") - sent for rank, sent in broadcast.sent.items()}
    # The Optimizer column in the same words: the step, the bytes it steps (DDP all, ZeRO-1 what a rank owns).
    assert picture("ddp").cells[(0, "update")].lines[:2] == ("SGD step", f"on {short_bytes(model_bytes('parameters'))}")
    owned = [picture("zero1").cells[(rank, "update")].lines[1] for rank in range(4)]
    assert owned == [f"on {short_bytes(sent)}" for _, sent in sorted(broadcast.sent.items())]


def test_fsdp_gathers_and_reduce_scatters_the_parameters_padded_to_a_multiple_of_the_ranks():
    model, _ = build_model("mlp", SETTINGS["input_size"], SETTINGS["output_size"])
    ranks = SETTINGS["gpus"]
    padded = sum(math.ceil(p.shape[0] / ranks) * ranks * p[0].numel() * p.element_size() for p in model.parameters())
    for column, label in (("forward", "all-gather"), ("backward", "all-gather"), ("backward", "reduce-scatter")):
        assert arrow("fsdp", column, label).sent == {rank: padded for rank in range(ranks)}, (column, label)


def test_a_pipeline_sends_each_stages_activations_forward_and_their_gradients_back():
    trace = trace_of("pipeline")
    model, _ = build_model("mlp", SETTINGS["input_size"], SETTINGS["output_size"])
    x = torch.randn(trace.batches[0].rows, SETTINGS["input_size"])
    layers = [len(stage) for stage in trace.facts["layers"]]
    with torch.no_grad():
        boundary = [model.net[: sum(layers[: s + 1])](x) for s in range(len(layers) - 1)]
    sizes = {s: out.numel() * out.element_size() for s, out in enumerate(boundary)}
    forward, backward = arrow("pipeline", "forward", "activations"), arrow("pipeline", "backward", "gradients")
    # each box gives what its stage sent (the arrow runs on to the neighbour, which says nothing of it)
    assert forward.sent == sizes and forward.received == {}
    assert backward.sent == {s + 1: b for s, b in sizes.items()} and backward.received == {}


@pytest.mark.parametrize("name", [name for name in ENGINES if name != "pipeline"])  # a pipeline's schedule trains
def test_forward_only_moves_nothing_after_the_forward_and_steps_nothing(name):
    trace = engine(name).record(RunConfig(engine=name, **{**SETTINGS, "train": False}))
    shown = read(name, trace)
    assert all(shown.cells[(lane.id, column)].idle for lane in trace.lanes for column in ("backward", "update"))
    assert {a.column for a in shown.arrows} <= {"input", "forward"}
    assert {a.name for a in shown.arrows} == {name for column, name in MOVES[name] if column in ("input", "forward")}


# The narrowest the chart is drawn: the page at 800 pixels keeps its sidebar open and leaves the chart about 440.
# Presenting, the page at 1024 leaves it PROJECTOR_PX (676, measured), what presentation() lays a chart out for.
NARROWEST_CHART_PX, PRESENTING_CHART_PX = 440, PROJECTOR_PX


@pytest.mark.parametrize("name", ENGINES)
def test_every_line_of_every_box_fits_its_box_at_the_narrowest_and_presenting(name):
    for present, width in ((False, NARROWEST_CHART_PX), (True, PRESENTING_CHART_PX)):
        fig = one_step_any(trace_of(name), 0)
        if present:
            fig = presentation(fig)
        margin = fig.layout.margin
        column_px = (width - margin.l - margin.r) / len(COLUMNS)
        box_px = (BOX_RIGHT - BOX_LEFT) * column_px
        for note in fig.layout.annotations:
            if note.name != "cell":
                continue
            size = note.font.size or CELL_SIZE
            for line in note.text.split("<br>"):
                shown = re.sub(r"<[^>]+>", "", line)  # the swatch's colour markup takes no room
                assert text_px(shown, size) <= box_px - 4, (name, present, shown)


def test_a_failed_step_draws_what_ran_and_nothing_after_where_it_stopped():
    from dpviz.presets import ALL_PRESETS

    # ddp-uneven: rank 0's fourth all-reduce waits for ranks that have run out of rows, until the timeout.
    trace = engine("ddp").record(ALL_PRESETS["ddp-uneven"].config)
    shown = read("ddp", trace, trace.failure.batch)
    assert shown.failed == "backward"
    assert not shown.cells[(0, "backward")].idle and shown.cells[(0, "update")].idle  # it never stepped
    assert all(shown.cells[(rank, column)].idle for rank in (1, 2) for column in ("input", "forward", "backward", "update"))
    # ddp-unused-parameter: step 2's forward raises in DDP's own check, after every rank loaded its rows.
    trace = engine("ddp").record(ALL_PRESETS["ddp-unused-parameter"].config)
    shown = read("ddp", trace, trace.failure.batch)
    assert shown.failed == "forward" and not shown.arrows
    assert all(shown.cells[(rank, "forward")].lines == ("raised",) for rank in (0, 1))
    assert all(shown.cells[(rank, "update")].idle for rank in (0, 1))
    # batchnorm-one-row: the last batch's 1-row chunk fails in replica 2's forward; no GPU steps.
    trace = engine("dp").record(ALL_PRESETS["batchnorm-one-row"].config)
    shown = read("dp", trace, trace.failure.batch)
    assert shown.failed == "forward" and all(shown.cells[(lane.id, "update")].idle for lane in trace.lanes)


@pytest.mark.parametrize("name", ENGINES)
def test_every_move_is_drawn_in_its_kinds_colour_from_the_one_legend(name):
    """One legend for every engine: a move's bar, arrows and swatches take its kind's colour, the kind its engine's
    traffic gives the same bytes (what Compare and the Timeline colour it by), never a colour of the engine's own."""
    from dpviz.analysis.traffic import traffic
    from dpviz.trace.legend import kind_color

    trace = trace_of(name)
    kinds = {move.kind for move in traffic(trace) if move.step == 0}
    assert {a.kind for a in picture(name).arrows} <= kinds
    fig = one_step_any(trace, 0)
    drawn = {a.arrowcolor for a in fig.layout.annotations if a.name == "arrow"}
    drawn |= {s.line.color for s in fig.layout.shapes if s.name == "bar"}
    assert drawn == {kind_color(a.kind) for a in picture(name).arrows}


def test_dataparallels_backward_moves_take_the_kinds_that_carry_them():
    assert arrow("dp", "backward", "grad sum").kind == "reduce"  # the replicate's backward sums into GPU 0
    assert arrow("dp", "backward", "output grad").kind == "scatter"  # the gather's backward cuts the gradient up


def test_two_moves_in_a_column_each_draw_one_whole_bar():
    """FSDP's backward all-gathers and reduce-scatters: each bar runs whole from rank 0 to rank 3, the all-gather's
    arrows crossing over the reduce-scatter's (a bar cut at each crossing read as broken stubs)."""
    fig = one_step_any(trace_of("fsdp"), 0)
    backward = [s for s in fig.layout.shapes if s.name == "bar" and 2 < s.x0 < 3]
    assert len(backward) == 2
    assert all((s.y0, s.y1) in ((-0.2, 2.8), (0.2, 3.2)) for s in backward), [(s.y0, s.y1) for s in backward]


@pytest.mark.parametrize("name", [name for name in ENGINES if name != "dp"])
def test_the_optimizer_column_says_the_same_things_in_every_engine(name):
    """What the step holds and what it moves, in bytes: the optimizer's step, the parameters' bytes it steps, the
    optimizer state it keeps (SGD's momentum), and only ZeRO-1 moving anything (its broadcast, with its bytes)."""
    shown = picture(name)
    trace = trace_of(name)
    for lane in trace.lanes:
        cell = shown.cells[(lane.id, "update")]
        if cell.idle:
            continue
        held = trace.facts["held"][lane.id]
        state = held["optimizer state"]["bytes"]
        assert cell.lines[0] == "SGD step" and cell.lines[1].startswith("on ")
        assert cell.lines[2] == (f"state {short_bytes(state)}" if state else "no state")
        if name != "zero1":
            assert cell.lines[1] == f"on {short_bytes(held['parameters']['bytes'])}"
        assert ("nothing moves" in cell.hover) == (name != "zero1")
    headings = [a.text for a in one_step_any(trace, 0).layout.annotations if a.name == "column"]
    assert ("nothing moves" in headings[-1]) == (name != "zero1")


def test_dataparallels_gpu0_steps_every_parameter_with_adams_state():
    settings = {**SETTINGS, "optimizer": "adam"}
    trace = engine("dp").record(RunConfig(engine="dp", **settings))
    cell = read("dp", trace).cells[(0, "update")]
    model, _ = build_model("mlp", SETTINGS["input_size"], SETTINGS["output_size"])
    copies = [torch.nn.Parameter(p.detach().clone()) for p in model.parameters()]
    for p in copies:
        p.grad = torch.ones_like(p)
    adam = torch.optim.Adam(copies)
    adam.step()
    state = sum(v.numel() * v.element_size() for s in adam.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0)
    assert cell.lines == ("Adam step", f"on {short_bytes(model_bytes('parameters'))}", f"state {short_bytes(state)}")


@pytest.mark.parametrize("name", ENGINES)
def test_every_engine_opens_on_the_last_whole_step_and_says_so(name):
    """One rule for every engine: 128 rows in batches of 32 on 4 devices make 4 whole steps (DDP's 32 rows a step
    are 8 a rank): every engine opens on the fourth and its title says why; a step moved to says nothing."""
    from dpviz.analysis.opening_step import opening_step

    trace = trace_of(name)
    assert opening_step(trace) == len(trace.batches) - 1 == 3
    unit = trace.spec.unit
    words = lambda fig: re.sub(r"\s*<br>\s*", " ", fig.layout.title.text)
    fig = one_step_any(trace, 3)
    assert words(fig).startswith(f"{unit.title()} 4 of 4, the last whole {unit}:"), words(fig)
    assert f"bytes in {unit} 4:" in re.sub(r"\s*<br>\s*", " ", fig.layout.title.subtitle.text)
    assert words(one_step_any(trace, 1)).startswith(f"{unit.title()} 2 of 4:")


@pytest.mark.parametrize("name", ENGINES)
def test_presenting_a_boxs_words_still_fit_its_box(name):
    """Presenting grows the type around the boxes, not in them: each box's lines were counted to fit its height at
    their size, and at 1.35 times it the first and last ran over the box's edges."""
    from dpviz.figures.one_step import BOX_HALF, LINE_PX
    fig = presentation(one_step_any(trace_of(name), 0))
    lanes = len(fig.layout.yaxis.tickvals)
    lane_px = (fig.layout.height - fig.layout.margin.t - fig.layout.margin.b) / lanes
    cells = [note for note in fig.layout.annotations if note.name == "cell"]
    assert cells
    for note in cells:
        assert len(note.text.split("<br>")) * LINE_PX * note.font.size / 12 <= 2 * BOX_HALF * lane_px, (name, note.text)


@pytest.mark.parametrize("name", ENGINES)
def test_no_text_in_one_step_is_under_12_px_also_presenting(name):
    fig = one_step_any(trace_of(name), 0)
    for shown in (fig, presentation(fig)):
        sizes = [note.font.size for note in shown.layout.annotations if note.text]
        assert sizes and min(sizes) >= 12, (name, min(sizes))


def test_eight_gpus_lanes_fit_a_projectors_first_screen_each_box_within_its_lane():
    from dpviz.figures.one_step import BOX_HALF, FIRST_SCREEN_CHART_PX, LINE_PX
    trace = engine("dp").record(RunConfig(engine="dp", **dict(SETTINGS, gpus=8, batch_size=30, data_size=100)))
    fig = one_step_any(trace, 0)
    lanes = len(fig.layout.yaxis.tickvals)
    assert lanes == 8 and fig.layout.height <= FIRST_SCREEN_CHART_PX
    lane_px = (fig.layout.height - fig.layout.margin.t - fig.layout.margin.b) / lanes
    for note in fig.layout.annotations:
        if note.name == "cell":  # the lines it keeps fit its box; what it leaves out, the hover gives
            assert len(note.text.split("<br>")) * LINE_PX <= 2 * BOX_HALF * lane_px, note.text
    shortened = [(note.x, note.y) for note in fig.layout.annotations if note.name == "cell" and note.text.endswith(MORE)]
    hovered = set(zip(fig.data[0].x, fig.data[0].y))
    assert shortened and all(at in hovered for at in shortened)  # a shortened box's hover says it whole


def _first_screen_room(name: str, notice_lines: int = 0) -> int:
    """What a projector's first screen leaves for One step's chart under engine `name`'s page heading, a notice of
    `notice_lines` lines above the tabs and the step's slider, as the page counts it (dpviz.page.room)."""
    from dpviz.engines import ENGINES
    from dpviz.page import room
    room.start(ENGINES[name].title)
    if notice_lines:
        room.add(room.NOTICE_PX + notice_lines * room.NOTICE_LINE_PX)
    room.add(room.CONTROL_PX)
    return room.left_px()


@pytest.mark.parametrize("link", ["gpus=8", "pipeline"])
def test_presenting_eight_gpus_and_four_stages_every_box_says_every_number_it_has(link):
    """On a projector's first screen (Presenting, 1024 x 768, under the page's slider) DataParallel's eight GPUs and a
    pipeline's four stages (the link opens it with the MLP, 3 microbatches, under a notice of two lines) keep every
    number of every box, rows and bytes, on the fewer lines a smaller box holds; nothing is cut to '[…]'."""
    if link == "pipeline":
        trace = engine("pipeline").record(RunConfig(engine="pipeline", gpus=4, train=True, model="mlp", microbatches=3))
        room = _first_screen_room("pipeline", notice_lines=2)  # the link's fitted settings, said above the tabs
    else:
        trace = engine("dp").record(RunConfig(engine="dp", gpus=8, train=True, batch_size=30, data_size=100))
        room = _first_screen_room("dp")
    step = len(trace.batches) - 1 if link == "pipeline" else len(trace.batches) - 2  # each page's opening step
    plain = one_step_any(trace, step)
    fig = presentation(plain, room_px=room)
    # every box's whole lines, as the figure keeps them for presentation() to fit
    whole = {(n.x, n.y): "<br>".join(plain.layout.meta[CELL_LINES][box_key(n.x, n.y)][0])
             for n in fig.layout.annotations if n.name == "cell"}
    assert fig.layout.margin.t + fig.layout.height - fig.layout.margin.t - fig.layout.margin.b <= room  # every lane
    shown = [n for n in fig.layout.annotations if n.name == "cell"]
    assert len(shown) == len(trace.lanes) * len(COLUMNS)
    assert any(n.text != whole[n.x, n.y] for n in shown)  # the boxes are smaller than their whole lines need
    for note in shown:
        assert MORE not in note.text, note.text
        assert _numbers(note.text) == _numbers(whole[note.x, note.y]), (note.text, whole[note.x, note.y])
    bytes_shown = [b for n in shown for b in re.findall(r"\d+(?:\.\d+)? [KM]?i?B", re.sub(r"<[^>]+>", "", n.text))]
    assert bytes_shown  # the moves' bytes are among them


@pytest.mark.parametrize("name", ENGINES)
def test_the_figure_made_without_plotlys_validation_is_the_validated_figure(name):
    """One step's figure is made without plotly validating it again (a new run waits for it): validated, and
    presented on a projector, it is the same figure."""
    import plotly.graph_objects as go

    made = one_step_any(trace_of(name), 0)
    validated = go.Figure(made.to_dict())
    assert made.to_dict() == validated.to_dict()
    assert presentation(made).to_dict() == presentation(validated).to_dict()


def _numbers(text: str) -> list[str]:
    """The numbers a box's words say, in order ('30', '4', '520'), its markup (a swatch's colour) left out."""
    return re.findall(r"\d+(?:[.,/]\d+)*", re.sub(r"<[^>]+>", "", text))


@pytest.mark.parametrize("name", ["dp", "fsdp"])
def test_presenting_four_lanes_in_less_room_each_box_keeps_its_numbers_in_the_lines_it_holds(name):
    """Four training lanes whose boxes run past a projector's first screen: the plot gives up height and each box's
    words go on the fewer lines its smaller box holds (joined, as wide as the box), the type keeping its size; a box
    that still shows less than its whole lines has them in a hover over it, word for word."""
    from dpviz.figures.one_step import BOX_HALF, LINE_PX
    plain = one_step_any(trace_of(name), 0)
    roomy = presentation(plain, room_px=10_000)
    room = roomy.layout.margin.t + (roomy.layout.height - roomy.layout.margin.t - roomy.layout.margin.b) - 120
    fig = presentation(plain, room_px=room)
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert fig.layout.margin.t + plot_px <= room  # the lanes, all four, end in the room
    lane_px = plot_px / len(fig.layout.yaxis.tickvals)
    whole = {(n.x, n.y): n.text for n in roomy.layout.annotations if n.name == "cell"}
    changed = [n for n in fig.layout.annotations if n.name == "cell" and n.text != whole[n.x, n.y]]
    assert changed  # the fullest boxes had to say it on fewer lines
    hovers = {(x, y): text for t in fig.data if t.hovertext is not None for x, y, text in zip(t.x, t.y, t.hovertext)}
    for note in fig.layout.annotations:
        if note.name == "cell":
            assert note.font.size == CELL_SIZE
            assert len(note.text.split("<br>")) * LINE_PX <= 2 * BOX_HALF * lane_px, note.text
    for note in changed:
        if _numbers(note.text) != _numbers(whole[note.x, note.y]):  # words left out: the hover says them all
            assert hovers[note.x, note.y] == re.sub(r"<[^>]+>", "", whole[note.x, note.y])


@functools.cache
def dp_preset(name: str):
    from dpviz.presets import ALL_PRESETS
    return engine("dp").record(ALL_PRESETS[name].config)


def _gpu0_forward(name: str) -> tuple[str, ...]:
    trace = dp_preset(name)
    step = trace.failure.batch if trace.failure is not None else len(trace.batches) - 1
    return read("dp", trace, step).cells[(trace.output_device, "forward")].lines


@pytest.mark.parametrize("name", ["batchnorm-one-row", "rnn-hidden-dim", "kwargs-small-batch"])
def test_gpu0_says_it_gathers_nothing_when_a_replica_raised(name):
    """A replica that raises ends DataParallel's forward in parallel_apply: gather never runs, so GPU 0 holds no
    output, and no loss is computed on it."""
    trace = dp_preset(name)
    assert trace.failure is not None and trace.failure.replica is not None
    assert not trace.spans_of(trace.failure.batch, "gather")  # the recorder saw no gather
    lines = _gpu0_forward(name)
    assert not [line for line in lines if line.startswith("gathers") or line == "loss"], lines


def test_gpu0_gathers_one_scalar_per_replica_when_forward_returns_a_0_dim_loss():
    """Each replica returns a 0-dim loss; gather unsqueezes them into a vector with one element per replica (its
    warning says so), however many rows the batch had."""
    trace = dp_preset("scalar-loss")
    step = len(trace.batches) - 1
    rows, gpus = trace.batches[step].rows, len(trace.lanes)
    replicas = len(torch.arange(rows).chunk(gpus))
    recorded = next(loss["gathered"] for loss in trace.facts["losses"] if loss["batch"] == step)
    assert len(recorded) == replicas != rows
    assert any("all input tensors were scalars" in w.message for w in trace.warnings)
    lines = _gpu0_forward("scalar-loss")
    said = " ".join(lines[lines.index("gathers"):])
    assert said == f"gathers {replicas} scalars" and f"gathers {rows}" not in lines
    for present, width in ((False, NARROWEST_CHART_PX), (True, PRESENTING_CHART_PX)):  # each line fits its box
        fig = presentation(one_step_any(trace, step)) if present else one_step_any(trace, step)
        column_px = (width - fig.layout.margin.l - fig.layout.margin.r) / len(COLUMNS)
        assert max(text_px(line, CELL_SIZE) for line in lines) <= (BOX_RIGHT - BOX_LEFT) * column_px - 4


def test_gpu0_gathers_the_rows_torch_returns_for_the_whole_batch():
    trace = trace_of("dp")
    model, _ = build_model("mlp", SETTINGS["input_size"], SETTINGS["output_size"])
    rows = model(torch.randn(trace.batches[0].rows, SETTINGS["input_size"])).shape[0]
    assert f"gathers {rows}" in picture("dp").cells[(0, "forward")].lines


@pytest.mark.parametrize("present", [False, True])
def test_a_failed_forward_marks_only_the_replica_that_raised(present):
    """batchnorm-one-row: torch.chunk leaves a 1-row chunk, on which BatchNorm raises in training; only that
    replica's box is edged in the failure colour, the other forwards ran to the end."""
    from dpviz.figures.one_step import FAILED
    trace = dp_preset("batchnorm-one-row")
    step = trace.failure.batch
    chunks = [len(c) for c in torch.arange(trace.batches[step].rows).chunk(len(trace.lanes))]
    one_row = chunks.index(1)
    with pytest.raises(ValueError):
        torch.nn.BatchNorm1d(3).train()(torch.randn(1, 3))  # torch refuses one value per channel
    shown = read("dp", trace, step)
    assert shown.failed == "forward" and shown.failed_lanes == (one_row,)
    fig = one_step_any(trace, step)
    if present:
        fig = presentation(fig)
    red = [s for s in fig.layout.shapes if s.name == "box" and s.line.color == FAILED]
    assert len(red) == 1 and red[0].y0 < one_row < red[0].y1


def test_an_idle_gpu_says_why_it_ran_no_replica():
    """rnn-hidden-dim: x's rows make a chunk for each GPU (torch.chunk), but h0 cut on its layers gives one piece
    and scatter zips them: GPU 1 is idle for want of h0, not of rows. batchnorm-one-row: 5 rows make 3 chunks on 4
    GPUs, so GPU 3 has no rows."""
    trace = dp_preset("rnn-hidden-dim")
    chunks = torch.arange(trace.batches[0].rows).chunk(len(trace.lanes))
    assert len(chunks) == len(trace.lanes) and len(torch.zeros(1, 30, 16).chunk(len(trace.lanes))) == 1
    hover = read("dp", trace, 0).cells[(1, "forward")].hover
    assert "no piece of h0" in hover and "rows" not in hover
    trace = dp_preset("batchnorm-one-row")
    step = trace.failure.batch
    assert len(torch.arange(trace.batches[step].rows).chunk(len(trace.lanes))) == 3
    assert "no rows left" in read("dp", trace, step).cells[(3, "forward")].hover

"""Memory view: a grid of each device's total after each phase over stacked bars at device 0's fullest
moment; every number is the trace's memory samples summed, in one unit a class reads."""
import dataclasses
from collections import defaultdict

import numpy as np
import pytest

from dpviz.figures import MAX_MARKS, count_marks, memory_figure, prepare_memory
from dpviz.engines.dp.vocabulary import VOCABULARY
from dpviz.analysis.batch_facts import memory_batches
from dpviz.figures.colors import contrast_ratio, device_color, text_color_on
from dpviz.figures.memory import GRID_ROW_PX, byte_unit
from dpviz.figures.sizes import AXIS_TITLE_SIZE
from dpviz.figures.text_fit import text_px
from dpviz.engines.dp.ledger import CATEGORIES
from dpviz.analysis.wording import human_bytes
from dpviz.trace import MemorySample
from figure_traces import MAX_JSON_BYTES, as_cuda, recorded


def _grid(fig):
    """{(step label, column): total bytes} from the grid, and its cells' written numbers."""
    (heat,) = [t for t in fig.data if t.type == "heatmap"]
    z = np.asarray(heat.z)
    written = {(y, x): t for x, y, t in _cell_numbers(fig)}
    return ({(s, c): z[i][j] for i, s in enumerate(heat.y) for j, c in enumerate(heat.x)},
            {(s, c): written.get((s, c), "") for s in heat.y for c in heat.x})


def _cell_numbers(fig):
    """(column, step, text) of each number written on the grid's cells: text traces on the grid's axes."""
    on_grid = [t for t in fig.data if t.type == "scatter" and t.mode == "text" and t.xaxis in (None, "x")
               and t.yaxis in (None, "y")]
    return [(x, y, text) for t in on_grid for x, y, text in zip(t.x, t.y, t.text)]


def _step(phase):
    """A phase as the memory view names it: the flow's and the timeline's word for the same moment."""
    return {"apply": "forward", "backward": "backward"}.get(phase, VOCABULARY.phase(phase).label)


def _totals(trace, batch):
    """Bytes per (phase, device) of `batch`: the memory samples summed, every lane present."""
    sums = {(m.phase, lane.id): 0 for m in trace.memory if m.batch == batch for lane in trace.lanes}
    for m in trace.memory:
        if m.batch == batch:
            sums[(m.phase, m.lane)] += m.bytes
    return sums


def _measured(trace):
    """The trace as real GPUs would record it: one "allocated" sample per device and phase."""
    totals = defaultdict(int)
    for m in trace.memory:
        totals[(m.batch, m.phase, m.lane)] += m.bytes
    memory = [MemorySample(b, p, lane, "allocated", n + 512) for (b, p, lane), n in totals.items()]
    return dataclasses.replace(as_cuda(trace), memory=memory, memory_kind="measured")


@pytest.mark.parametrize("gpus,batch,train", [(3, None, True), (3, 3, True), (8, 3, True), (1, 0, True), (16, None, True),
                                              (16, 3, False)])
def test_grid_cells_are_the_samples_summed_per_device_and_phase(gpus, batch, train):
    trace = recorded(gpus=gpus, train=train)
    fig = memory_figure(trace, batch)
    shown = 0 if batch is None else batch
    column = (lambda d: f"GPU {d}") if gpus <= 4 else str
    grid, written = _grid(fig)
    expected = {(_step(p), column(d)): n for (p, d), n in _totals(trace, shown).items()}
    assert grid == expected  # every slot, empty ones too, under the step names the other views write
    unit = byte_unit(max(expected.values()))
    assert all(written[k] in ("", unit.number(n) if n else "0") for k, n in expected.items())
    # Past eight columns (~22 px each) numbers ran together: none, the hover and the bars' totals give them.
    assert all(written[k] == "" for k in expected) if gpus > 8 else all(written[k] for k in expected)
    assert f"batch {shown + 1} of {len(trace.batches)}" in fig.layout.title.text.replace("<br />", " ")  # read from 1


@pytest.mark.parametrize("gpus", [3, 8, 16])
def test_bars_break_down_device_zeros_fullest_moment_by_kind(gpus):
    trace = recorded(gpus=gpus, train=True)
    fig = memory_figure(trace)
    totals = _totals(trace, 0)
    peak_phase = max((p for p, d in totals if d == 0), key=lambda p: totals[(p, 0)])
    label = _step(peak_phase)
    unit = byte_unit(max(totals.values()))
    column = (lambda d: f"GPU {d}") if gpus <= 4 else str
    bars = defaultdict(float)
    for t in fig.data:
        if t.type == "bar":
            assert t.name in CATEGORIES and t.marker.color == VOCABULARY.memory_kind(t.name).color
            for x, y in zip(t.x, t.y):
                bars[x] += y * unit.size
    assert {k: round(v) for k, v in bars.items() if v} == {column(d): n for (p, d), n in totals.items() if p == peak_phase and n}
    assert fig.layout.yaxis2.title.text == f"after {label} ({unit.name})"


def test_sum_of_gradients_reads_as_the_vocabulary_names_it():
    fig = memory_figure(recorded(gpus=3, train=True))
    steps = list(_grid(fig)[0])
    assert VOCABULARY.phase("reduce").label in {s for s, _ in steps} and "reduce" not in {s for s, _ in steps}


@pytest.mark.parametrize("gpus", [2, 3, 8, 16])
def test_device_zero_is_the_tallest(gpus):
    for train in (False, True):
        trace = recorded(gpus=gpus, train=train)
        table = prepare_memory(trace)
        slots = table.drop_duplicates(["phase", "device"])
        assert slots.loc[slots["total"].idxmax(), "device"] == 0
        assert memory_figure(trace).layout.title.text.endswith("GPU 0 carries the most")


def test_caption_says_why_device_zero_carries_more():
    fig = memory_figure(recorded(gpus=3, train=True))
    (caption,) = [a.text for a in fig.layout.annotations]
    caption = caption.replace("<br />", " ").replace("<br>", " ")  # wrapped to a narrow chart's width
    backward = _step("backward")
    assert f"After {backward}, GPU 0 holds 1.23 KiB: 2.8× the 0.45 KiB of GPU 1." in caption  # the figure's unit
    assert "Only GPU 0 holds: parameters · gradients · optimizer state · output and loss." in caption
    assert "batch and chunks (the whole batch, not one chunk)" in caption
    forward = [a.text for a in memory_figure(recorded(gpus=3)).layout.annotations][0].replace("<br />", " ").replace("<br>", " ")
    assert "After gather" in forward and "gradients" not in forward  # forward only: no gradients anywhere


def test_label_follows_the_memory_kind():
    computed = memory_figure(recorded(gpus=3, train=True))
    assert "computed from tensor sizes (simulated devices)" in computed.layout.title.subtitle.text
    assert "memory_allocated" not in computed.to_json()
    assert {t.name for t in computed.data if t.type == "bar"} <= set(CATEGORIES)
    assert all(t.marker.color == VOCABULARY.memory_kind(t.name).color for t in computed.data if t.type == "bar")
    measured = memory_figure(_measured(recorded(gpus=3, train=True)))
    assert "measured: torch.cuda.memory_allocated" in measured.layout.title.subtitle.text
    assert "computed" not in measured.layout.title.subtitle.text and "simulated" not in measured.to_json().lower()
    (bar,) = [t for t in measured.data if t.type == "bar"]  # one plain bar per device, in its own colour
    assert list(bar.marker.color) == [device_color(int(t[-1])) for t in bar.x]
    assert max(bar.y) * 1024 == 1260 + 512 and list(bar.x).index("GPU 0") == int(np.argmax(bar.y))


def test_amounts_are_in_one_unit_a_class_reads():
    assert [human_bytes(n) for n in (0, 1000, 1024, 1536, 3 * 2**20, 2**30)] == [
        "0 B", "1,000 B", "1.00 KiB", "1.50 KiB", "3.00 MiB", "1.00 GiB"]
    assert [(u.name, u.decimals) for u in map(byte_unit, (920, 1023, 1024, 1260, 45 * 2**10, 450 * 2**10, 3 * 2**30))] == [
        ("B", 0), ("B", 0), ("KiB", 2), ("KiB", 2), ("KiB", 1), ("KiB", 0), ("GiB", 2)]
    kib = byte_unit(1260)
    assert [kib.number(n) for n in (0, 3, 80, 1260)] == ["0.00", "<0.01", "0.08", "1.23"]
    assert kib.amount(1260) == "1.23 KiB" and byte_unit(920).amount(920) == "920 B"
    for gpus, train, unit in [(3, True, "KiB"), (8, False, "B"), (16, True, "KiB")]:
        fig = memory_figure(recorded(gpus=gpus, train=train))
        grid = fig.layout.yaxis.title.text  # words and the unit, along the grid's height: never a lone "KiB"
        assert grid.endswith(f"({unit})") and grid.split(" (")[0] in ("bytes held per GPU", "held")
        (heat,) = [t for t in fig.data if t.type == "heatmap"]
        assert text_px(grid, AXIS_TITLE_SIZE) <= max(GRID_ROW_PX * len(heat.y), 120)  # along the grid, not past it
        assert fig.layout.yaxis2.title.text.endswith(f"({unit})")
        written = [t for row in _grid(fig)[1].values() for t in [row]]
        assert all(w in ("", "0") or w[0].isdigit() or w.startswith("<") for w in written)  # numbers: the axis names the unit


def test_sixteen_devices_write_only_the_two_totals_that_matter_over_the_bars():
    fig = memory_figure(recorded(gpus=16, train=True))
    (totals,) = [t for t in fig.data if t.type == "scatter" and t.name == "totals"]
    assert list(totals.x) == ["0", "1"]  # device 0 and the fullest other (the first of equals)
    assert list(memory_figure(recorded(gpus=3, train=True)).data[-1].x) == ["GPU 0", "GPU 1", "GPU 2"]


def _scale_at(scale, t: float) -> str:
    """The colour a continuous colourscale paints at `t` in [0, 1]: its two stops either side mixed channel by
    channel, as plotly mixes them."""
    t = min(max(t, 0.0), 1.0)
    stops = [(float(p), [int(c[k:k + 2], 16) for k in (1, 3, 5)]) for p, c in scale]
    (p0, c0), (p1, c1) = next((a, b) for a, b in zip(stops, stops[1:]) if a[0] <= t <= b[0])
    share = (t - p0) / (p1 - p0) if p1 > p0 else 1.0
    return "#" + "".join(f"{round(a + share * (b - a)):02X}" for a, b in zip(c0, c1))


@pytest.mark.parametrize("gpus", [2, 8, 16])
@pytest.mark.parametrize("train", [False, True], ids=["forward", "train"])
def test_every_number_on_a_cell_reads_on_its_grey(gpus, train):
    """'344' in white on a mid grey (#7B7B7B) and '204' in #444444 on #ABABAB read at 4.2:1: plotly's own choice of
    ink for a heatmap's text. Each number on a cell takes black or white, whichever contrasts more with the grey
    the grid's colourscale paints it, and reads at 4.5:1 at least (WCAG AA) on every cell of every sampled batch;
    the bars' totals, over the bars on the page, take the page theme's ink."""
    trace = recorded(gpus=gpus, train=train)
    inks = set()
    for batch in memory_batches(trace):
        fig = memory_figure(trace, batch)
        (heat,) = [t for t in fig.data if t.type == "heatmap"]
        fills = {(s, c): _scale_at(heat.colorscale, (heat.z[i][j] - heat.zmin) / (heat.zmax - heat.zmin))
                 for i, s in enumerate(heat.y) for j, c in enumerate(heat.x)}
        written = 0
        for t in fig.data:
            if t.type == "scatter" and t.name == "cell totals":
                for x, y, ink in zip(t.x, t.y, t.textfont.color):
                    assert contrast_ratio(ink, fills[(y, x)]) >= 4.5, f"{ink} on {fills[(y, x)]} at {x}, {y}"
                    inks.add(ink)
                    written += 1
        assert written == (len(fills) if gpus <= 8 else 0)  # every cell's number, or (past eight) none
        (totals,) = [t for t in fig.data if t.name == "totals"]
        assert totals.textfont.color is None and totals.textposition == "top center"
    if gpus <= 8 and train:  # device 0's dark cells and the others' light ones: an ink per cell
        assert inks == {"#000000", "#FFFFFF"}
    # Whatever the amounts: every grey of the ramp has an ink of 4.5:1 (black or white, whichever reads).
    for share in np.linspace(0, 1, 257):
        fill = _scale_at(heat.colorscale, share)
        assert contrast_ratio(text_color_on(fill), fill) >= 4.5, fill


def test_batch_must_be_a_sampled_one():
    trace = recorded(gpus=3, train=True)
    with pytest.raises(ValueError, match="memory was sampled for batches 0 and 3 only, got 1"):
        memory_figure(trace, 1)
    with pytest.raises(ValueError, match="no memory samples"):
        memory_figure(dataclasses.replace(trace, memory=[]))


def test_sixteen_devices_stay_small():
    fig = memory_figure(recorded(gpus=16, train=True), 3)
    assert count_marks(fig) <= MAX_MARKS and len(fig.to_json()) < MAX_JSON_BYTES
    assert fig.layout.xaxis2.title.text == "GPU" and list(fig.layout.xaxis.categoryarray) == [str(d) for d in range(16)]


@pytest.mark.parametrize("gpus", [3, 16])
def test_steps_and_columns_named_as_the_other_views_name_them(gpus):
    from dpviz.engines.dp.read.flow_draw import step_name
    from dpviz.figures.text_fit import unwrap

    trace = recorded(gpus=gpus, train=True)
    fig = memory_figure(trace)
    steps = list(dict.fromkeys(s for s, _ in _grid(fig)[0]))
    # After parallel_apply is after the forwards, as the flow and the timeline say; no hatch hint "(×)".
    assert steps == [step_name(trace, p) for p in ("scatter", "replicate", "forward", "gather", "loss", "backward",
                                                   "reduce", "step")]
    assert not any("(×)" in unwrap(fig.layout[a].title.text or "") for a in ("yaxis", "yaxis2"))
    columns = [f"GPU {d}" for d in range(gpus)] if gpus <= 4 else [str(d) for d in range(gpus)]
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):  # columns named under the grid and under the bars
        assert list(axis.categoryarray) == columns and axis.showticklabels is not False and axis.tickfont.size >= 11
        # Every one while they fit side by side on the narrowest chart; at 16, every other one, GPU 0 first.
        assert list(axis.tickvals) == (columns if gpus <= 8 else columns[::2]) == list(axis.ticktext)
    if gpus > 4:
        assert fig.layout.xaxis2.title.text == "GPU"
    numbers = [t for t in fig.data if t.type == "scatter" and t.name == "cell totals"]
    assert len(numbers) == (gpus <= 8) and all(t.textfont.size >= 11 for t in numbers)
    assert list(fig.layout.xaxis2.categoryarray) == columns  # an idle GPU's empty bar keeps its column


def _room(fig, width_px=None):
    """(legend top px, legend height px, title block end px, plot top px) of a figure laid out for a chart
    `width_px` wide (the narrowest's by default)."""
    from dpviz.figures.layout import title_block_px
    from dpviz.figures.legends import legend_px

    layout = fig.layout
    plot = layout.height - layout.margin.t - layout.margin.b
    height = legend_px(fig, width_px) if width_px else legend_px(fig)
    bottom = layout.margin.t - (layout.legend.y - 1) * plot
    return bottom - height, height, title_block_px(fig), layout.margin.t


@pytest.mark.parametrize("gpus", [8, 16])
@pytest.mark.parametrize("presenting", [False, True], ids=["plain", "presenting"])
def test_the_legend_sits_above_the_grid_and_the_caption_fits_the_chart(gpus, presenting):
    """The legend of kinds sat between the panels over the grid's last row and its GPU numbers, and the
    caption was cut at the chart's right edge when presenting ('1.18 Ki', 'gradier'). Now the legend is
    above the grid, all its rows counted at the narrowest chart (presenting, the projector's), and the caption
    is wrapped to the chart's width at its own size, with the bottom margin to hold every line."""
    from dpviz.figures.presenting import presentation
    from dpviz.figures.sizes import NARROWEST_PX, PROJECTOR_PX
    from dpviz.figures.text_fit import text_px

    from dpviz.figures.legends import legend_entries, legend_px
    from dpviz.figures.presenting_fold import NOTES

    fig = memory_figure(recorded(gpus=gpus, train=True))
    fig = presentation(fig) if presenting else fig
    layout = fig.layout
    caption, *moved = [a for a in layout.annotations]
    width = PROJECTOR_PX if presenting else NARROWEST_PX
    if not presenting:  # in two columns over the grid, meeting at the plot's left edge: as tall at every width
        from dpviz.figures.layout import title_block_px
        from dpviz.figures.legends import column_px, legend_columns

        assert legend_columns(fig) == ["legend", "legend2"]
        first, second = layout.legend, layout.legend2
        assert (first.x, first.xanchor, second.x, second.xanchor) == (0, "right", 0, "left")
        assert all(c.xref == c.yref == "paper" and c.y == 1 and c.yanchor == "bottom" for c in (first, second))
        names = legend_entries(fig), legend_entries(fig, "legend2")
        assert len(names[0]) - len(names[1]) in (0, 1)
        widest = max(text_px(n, first.font.size) for n in [*names[0], *first.title.text.split("<br />")])
        assert 40 + widest <= layout.margin.l  # the first column stands in the step names' margin
        assert layout.margin.t >= title_block_px(fig) + column_px(len(names[0]), first.font.size, first.title.text)
        assert not moved
    elif layout.legend.orientation == "v":  # presenting, where the plot ran past the first screen: beside the plot
        plot_px = layout.height - layout.margin.t - layout.margin.b
        size = layout.legend.font.size
        widest = max(text_px(name, size) for name in legend_entries(fig))
        assert presenting and layout.legend.x == 1 and layout.legend.xanchor == "left"  # right of the plot
        assert layout.legend.y == 0 and layout.legend.yanchor == "bottom"  # beside the bars, on the first screen
        assert layout.margin.r >= 40 + widest  # the chart holds its swatches and words
        rows = len(legend_entries(fig)) + layout.legend.title.text.count("<br>") + 1
        assert rows * 1.3 * size <= plot_px  # its rows stand beside the plot, no taller
        assert [a.name for a in moved] == [NOTES]  # the subtitle's notes moved under the plot
    elif layout.legend.yanchor == "top":  # presenting, where the plot ran past the first screen: moved under it
        plot_px = layout.height - layout.margin.t - layout.margin.b
        under_px = -layout.legend.y * plot_px
        caption_px = -caption.yshift + caption.text.count("<br") * caption.font.size * 1.3 + caption.font.size
        assert presenting and under_px >= caption_px  # under the caption, not on it
        assert layout.margin.b >= under_px + legend_px(fig, width) - 1  # and held by the chart
        assert [a.name for a in moved] == [NOTES]  # the subtitle's notes with it
    else:
        assert layout.legend.orientation == "h" and layout.legend.yanchor == "bottom" and layout.legend.y >= 1
        top, height, block, plot_top = _room(fig, width)
        assert height > 0 and top >= block - 1 and top + height <= plot_top + 1
        assert not moved
    assert caption.xshift == -layout.margin.l  # from the chart's left edge, not the plot's
    lines = caption.text.replace("<br />", "<br>").split("<br>")
    room = width - (layout.margin.r if layout.legend.orientation != "v" else 0)  # under a legend beside the plot
    assert max(text_px(line, caption.font.size) for line in lines) <= room * 1.1
    assert layout.margin.b >= -caption.yshift + len(lines) * caption.font.size * 1.3


@pytest.mark.parametrize("gpus", [8, 16])
@pytest.mark.parametrize("presenting", [False, True], ids=["plain", "presenting"])
def test_column_names_never_run_together(gpus, presenting):
    """'1011121314' under sixteen bars: the names shown fit side by side on the narrowest chart, at
    their size, with a gap; fewer are named (every other one) rather than run together."""
    from dpviz.figures.presenting import presentation
    from dpviz.figures.sizes import NARROWEST_PX, PROJECTOR_PX
    from dpviz.figures.text_fit import text_px

    fig = memory_figure(recorded(gpus=gpus, train=True))
    fig = presentation(fig) if presenting else fig
    # Presenting lays the chart out for a projector's (a legend may stand beside the plot there)
    plot_px = (PROJECTOR_PX if presenting else NARROWEST_PX) - fig.layout.margin.l - fig.layout.margin.r
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):
        columns = list(axis.categoryarray)
        shown = list(axis.tickvals)
        assert shown[0] == columns[0] and len(shown) >= len(columns) // 3
        step = columns.index(shown[1]) - columns.index(shown[0]) if len(shown) > 1 else 1
        widest = max(text_px(n, axis.tickfont.size) for n in shown)
        assert widest + 4 <= step * plot_px / len(columns)


@pytest.mark.parametrize("totals,expected", [
    ((152_576, 152_576), "the ranks hold 149 KiB, each rank the same.</b>"),
    ((152_576, 152_300), "the ranks hold 149 KiB, each rank the same (to within 276 B).</b>"),  # 149 KiB, both
    ((152_576, 122_880), "the ranks hold 120 KiB to 149 KiB (rank 0 the most).</b>"),
])
def test_a_captions_lead_never_reads_x_to_x(totals, expected):
    """Ranks whose fullest totals the figure writes alike are "each rank the same", not "149 KiB to 149 KiB (rank 0
    the most)", as FSDP's equal shards read once their bytes differed by a few."""
    import pandas as pd
    from types import SimpleNamespace
    from dpviz.engines.ddp.vocabulary import VOCABULARY as DDP
    from dpviz.figures.memory_lead import fullest_lead

    table = pd.DataFrame({"device": [0, 1], "total": list(totals), "step": ["loss", "loss"]})
    lead = fullest_lead(SimpleNamespace(vocabulary=DDP), table, byte_unit(max(totals)))
    assert lead.endswith(expected)
    assert ("(after loss)" in lead) == (expected.count("KiB") == 1)


def test_presenting_lays_the_legends_columns_out_as_one_legend_in_rows():
    """On a projector the chart is laid out for one known width: its two columns of kinds are one legend again, in
    the rows that width takes (and which Presenting may fold beside or under the plot); the plain figure is kept."""
    from dpviz.figures.legends import legend_entries
    from dpviz.figures.presenting import presentation
    from dpviz.figures.text_fit import unwrap

    fig = memory_figure(recorded(gpus=4, train=True))
    before = fig.to_json()
    out = presentation(fig, room_px=10_000)  # room to spare: nothing folds
    whole = out.to_dict()
    assert [k for k in whole["layout"] if k.startswith("legend")] == ["legend"]
    assert all("legend" not in trace for trace in whole["data"])
    assert out.layout.legend.orientation == "h" and out.layout.legend.y == pytest.approx(1, abs=0.2)
    assert unwrap(out.layout.legend.title.text) == "kind of tensor (the bars):"
    names = legend_entries(fig) + legend_entries(fig, "legend2")
    assert legend_entries(out) == names and len(names) >= 4
    assert fig.to_json() == before

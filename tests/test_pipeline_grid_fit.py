"""The pipeline's slot grids on the narrowest chart, usual and presenting: every label drawn in a pass's cell fits it
(the others are left out, and the hover names every pass in full), a backward's hatch never takes from its label's
contrast, and two stacked panels leave room for the upper one's ticks and the lower one's title.

Two small real runs, recorded once (one gloo process per stage): 4 stages with 4 microbatches, whose 14 slots hold
every label, and with 16, whose 38 slots are too narrow for any: the Schedule numbers their microbatches on tags.
"""
from __future__ import annotations

import re
from functools import cache

import pytest

from dpviz.config import RunConfig
from dpviz.engines import engine
from dpviz.engines.pipeline.read.compare import schedules_figure
from dpviz.engines.pipeline.read.grid_fit import TAG_PX, TAG_SIZE, plot_px as narrowest_plot_px
from dpviz.engines.pipeline.read.schedule import schedule_figure, wall_clock_figure
from dpviz.engines.pipeline.read.step import step_pipeline_figure
from dpviz.figures.colors import contrast_ratio
from dpviz.figures.presenting import presentation
from dpviz.figures.sizes import FONT_SIZE, LINE_EM, PROJECTOR_PX, TICK_SIZE
from dpviz.figures.text_fit import line_count, text_px, unwrap
from test_figures_step import assert_controls_between_title_and_plot, assert_controls_under_plot

CHART_PX = 440  # the page's chart in an 800 px window (452 px measured there)
PLOTLY_PAD_PX = 3  # plotly keeps bar text this far inside the bar's edge
BASE = dict(engine="pipeline", train=True, inputs="tensor", model="mlp", gpus=4, schedule="gpipe", batch_size=32,
            data_size=64)  # two steps, microbatches of 2 rows (BatchNorm needs more than one)


@cache
def run(microbatches: int):
    return engine("pipeline").record(RunConfig(**BASE, microbatches=microbatches))


def figures(microbatches: int):
    trace = run(microbatches)
    return {"schedule": schedule_figure(trace, 1), "wall clock": wall_clock_figure(trace, 1),
            "schedules": schedules_figure(trace),
            "step": step_pipeline_figure(trace, 1)}


def labelled_bars(fig):
    return [t for t in fig.data if t.type == "bar" and t.text is not None]


def axis_of(fig, trace):
    return fig.layout["xaxis" + (trace.xaxis or "x")[1:]]


@pytest.mark.parametrize("microbatches", [4, 16])
def test_every_label_fits_its_cell_on_the_narrowest_chart_and_the_hover_names_every_pass(microbatches):
    for name, fig in figures(microbatches).items():
        # Presenting lays a chart out for a projector's (a legend may stand beside the plot there)
        for look, chart_px in ((fig, CHART_PX), (presentation(fig), PROJECTOR_PX)):
            plot_px = chart_px - look.layout.margin.l - look.layout.margin.r
            for trace in labelled_bars(look):
                size = trace.textfont.size
                assert size is not None and size >= 9, (name, size)  # its own size, not plotly's fit of the moment
                axis = axis_of(look, trace)
                assert axis.range is not None, f"{name}: the axis the labels were fitted to is set"
                span = axis.range[1] - axis.range[0]
                for label, length in zip(trace.text, trace.x):
                    if label:
                        cell = plot_px * length / span
                        assert text_px(label, size) + 2 * PLOTLY_PAD_PX <= cell, (name, label, cell)
                # The hover does not read the label, which may be left out: it names the pass itself (a backward's
                # label's plate has none: the hatched bar under it answers).
                if trace.hoverinfo != "skip":
                    assert "%{text}" not in trace.hovertemplate and "microbatch" in trace.hovertemplate, name


def test_a_few_microbatches_keep_every_label_and_many_leave_out_what_would_run_together():
    few = figures(4)["schedules"]
    grid = [t for t in labelled_bars(few) if t.xaxis == "x"]
    assert sorted(label for t in grid for label in t.text) == sorted(f"{k}{m}" for k in "FB" for m in range(1, 5)
                                                                     for _ in range(4))
    many = figures(16)
    for name in ("schedules", "step"):
        assert not any(label for t in labelled_bars(many[name]) for label in t.text), name


@pytest.mark.parametrize("microbatches", [4, 16])
def test_the_schedules_cells_too_narrow_for_a_label_name_their_microbatch_on_tags_that_never_run_together(microbatches):
    for name in ("schedule", "wall clock"):  # the replay, and the same passes on this host's clock under it
        fig = figures(microbatches)[name]
        plot_px = CHART_PX - fig.layout.margin.l - fig.layout.margin.r
        span = fig.layout.xaxis.range[1]
        labelled = {label for t in labelled_bars(fig) for label in t.text if label}
        tags = [t for t in fig.data if t.type == "scatter"]
        named = {re.sub(r"^[FB]", "", label) for label in labelled} | {text for t in tags for text in t.text}
        # Every row names its first microbatch, and the replay (each pass as long as its CPU time, which a busy
        # machine barely moves) at least four in all. The wall clock's cells are this host's times, waits for its
        # cores included, so which of them have room for a tag is up to the run.
        assert "1" in named, (name, named)
        if name == "schedule":
            assert len(named) >= min(microbatches, 4), (name, named)
        assert_every_pass_named_or_crowded_out(fig, tags, narrowest_plot_px() / span)  # as the tags were spaced
        for t in tags:
            assert t.marker.size == TAG_PX and t.textfont.size == TAG_SIZE
            assert all(text_px(text, TAG_SIZE) + 2 <= TAG_PX for text in t.text)  # the number inside its tag
            for row in set(t.y):
                xs = sorted(x for x, y in zip(t.x, t.y) if y == row)
                assert all((b - a) * plot_px / span >= TAG_PX for a, b in zip(xs, xs[1:])), (name, row)


def assert_every_pass_named_or_crowded_out(fig, tags, px_per_unit: float) -> None:
    """A pass goes without its microbatch's number only where a tag would run into a number already on its row: a
    tag just before it, or a label beside it."""
    passes = [t for t in fig.data if t.type == "bar" and t.name in ("forward", "backward") and t.hoverinfo != "skip"]
    labelled = labelled_bars(fig)
    for row in {y for t in passes for y in t.y}:
        def centres(traces, named=lambda text: True):
            return sorted((base + length / 2) * px_per_unit for t in traces
                          for y, base, length, text in zip(t.y, t.base, t.x, t.text if t.text is not None
                                                           else [None] * len(t.y)) if y == row and named(text))
        labels = centres(labelled, named=bool)
        tagged = sorted(x * px_per_unit for t in tags for x, y in zip(t.x, t.y) if y == row)
        for centre in centres(passes):
            if any(abs(centre - c) < 1e-6 for c in labels + tagged):
                continue
            crowded = any(0 < centre - c < TAG_PX + 2 for c in tagged) or any(abs(centre - c) < TAG_PX for c in labels)
            assert crowded, (row, centre, "a pass with room for a tag goes without its microbatch's number")


@pytest.mark.parametrize("microbatches", [4, 16])
def test_a_backwards_hatch_never_takes_from_its_labels_contrast(microbatches):
    for name, fig in figures(microbatches).items():
        for trace in labelled_bars(fig):
            pattern = trace.marker.pattern
            # plotly draws a hatch in the colour asked for only on a trace of one fill colour: given a list of fills
            # (or of hatch colours) it picks its own ink
            if pattern.shape:
                assert isinstance(pattern.fgcolor, str) and isinstance(trace.marker.color, str), name
            fills = [trace.marker.color] * len(trace.x) if isinstance(trace.marker.color, str) else trace.marker.color
            for k, fill in enumerate(fills):
                ink = trace.textfont.color[k]
                assert contrast_ratio(ink, fill) >= 4.5, (name, ink, fill)
                if pattern.shape:  # any blend of the fill and the hatch contrasts with the label as the fill does, or more
                    assert contrast_ratio(ink, pattern.fgcolor) >= contrast_ratio(ink, fill), (name, ink, fill)


@pytest.mark.parametrize("microbatches", [4, 16])
def test_stacked_panels_leave_room_for_the_upper_ones_ticks_and_the_lower_ones_title(microbatches):
    for name in ("schedules",):  # GPipe's grid over 1F1B's
        fig = figures(microbatches)[name]
        plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
        domains = sorted((fig.layout[k].domain for k in fig.layout if re.match(r"yaxis\d*$", k)), key=lambda d: -d[1])
        assert len(domains) == 2, name
        (lower, upper) = domains[1], domains[0]
        title = next(a for a in fig.layout.annotations if abs(a.y - lower[1]) < 1e-6)
        words = TICK_SIZE * LINE_EM + line_count(title.text) * (title.font.size or FONT_SIZE) * LINE_EM
        assert (upper[0] - lower[1]) * plot_px >= words + 12, (name, title.text)


@pytest.mark.parametrize("microbatches", [4, 16])
def test_step_throughs_slider_keeps_off_the_grid_when_presenting(microbatches):
    # The slider's slot numbers stay on the page, where the theme's ink reads, never on the grid's idle grey (1.8:1
    # in the dark theme): over the grid on the plain chart, under it on a projector's, where the grid comes first.
    step = figures(microbatches)["step"]
    assert_controls_between_title_and_plot(step)
    assert_controls_under_plot(step, presentation(step, 1.35), 1.35)


@pytest.mark.parametrize("microbatches", [4, 16])
def test_a_backwards_label_sits_on_a_plain_plate_of_its_colour_not_on_its_hatch(microbatches):
    # On the hatch, a small glyph sat on a weave of the fill and the hatch's ink with no colour of it in the majority
    # (the page's check read the glyph's own black as its background, 1.0:1, on some runs' Schedule).
    for name in ("schedule", "wall clock"):
        fig = figures(microbatches)[name]
        bars = [t for t in fig.data if t.type == "bar"]
        hatched = [t for t in bars if t.marker.pattern.shape]
        assert hatched, name
        assert not any(t.text is not None and any(t.text) for t in hatched), name  # no label drawn on a hatch
        plates = [t for t in labelled_bars(fig) if not t.marker.pattern.shape and t.hoverinfo == "skip"]
        for plate in plates:
            under = next(t for t in hatched if t.marker.color == plate.marker.color)
            cells = list(zip(under.y, under.base, under.x))
            assert plate.width < under.width  # inside its bar: the bar's outline shows over and under it
            for y, base, length, label in zip(plate.y, plate.base, plate.x, plate.text):
                # on the middle of a backward of its own colour, inside it
                assert any(y == cy and cb - 1e-9 <= base and base + length <= cb + cl + 1e-9
                           and abs((base + length / 2) - (cb + cl / 2)) < 1e-6 for cy, cb, cl in cells), (name, label)
        if microbatches == 4 and name == "schedule":
            assert plates and sum(1 for t in plates for label in t.text if label), name  # 4 microbatches keep labels


@pytest.mark.parametrize("microbatches", [4, 16])
def test_the_legend_names_each_kind_of_pass_by_an_open_swatch_not_by_one_microbatchs_colour(microbatches):
    # Every bar takes its microbatch's colour: a legend whose "forward" swatch was microbatch 1's blue told a class
    # that forwards are blue. Each kind has one entry, without a fill, the backward's hatched, in the legend group of
    # its bars (a click hides them all); the colours' meaning is said in the legend's title or the notes.
    shown = lambda fig: [t for t in fig.data if t.showlegend is not False and t.name in ("forward", "backward")]
    for name, fig in figures(microbatches).items():
        if name == "step":  # Step through draws no legend
            continue
        entries = shown(fig)
        assert [t.name for t in entries] == ["forward", "backward"], name
        for entry in entries:
            assert entry.marker.color == "rgba(0,0,0,0)" and entry.legendgroup == entry.name, name
            bars = [t for t in fig.data if t.type == "bar" and t.legendgroup == entry.name and t is not entry]
            assert bars and all(t.showlegend is False for t in bars), name
        assert entries[0].marker.pattern.shape in (None, "") and entries[1].marker.pattern.shape == "x", name
        colours = {c for t in fig.data if t.type == "bar" and t.legendgroup == "forward" and t.x and t.x[0] is not None
                   for c in ([t.marker.color] if isinstance(t.marker.color, str) else t.marker.color)}
        assert len(colours) == min(microbatches, 16), name  # what the swatch stands for: a colour per microbatch
        said = unwrap(" ".join([fig.layout.legend.title.text or "", fig.layout.title.text,
                                fig.layout.title.subtitle.text or "", *(a.text for a in fig.layout.annotations)]))
        assert "its microbatch's colour" in said or "each in its colour" in said, name

"""Every view follows the page's light or dark theme: no ink or background of its own off the marks,
text on a mark readable on it, device colours that show on both pages.

On the page, st.plotly_chart's theme="streamlit" sets the background, the text, the grid and the hover
labels for the active theme, into the figure's template; a colour the figure sets itself wins over it,
so dark text set by a view stays dark on the dark theme. These tests build every view of VIEWS (and a pipeline's own) from
traces of 2, 8 and 16 simulated GPUs (training), a real DDP run and a real pipeline, and check the figure itself.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace

import plotly.io as pio
import pytest

from dpviz.figures.colors import (
    DARK_BACKGROUND, DEVICE_COLORS, LIGHT_BACKGROUND, OUTLINE, THEME_TEXT, contrast_ratio, device_colors,
)
from dpviz.figures import VIEWS
from dpviz.figures.views import BATCH, SAMPLED, TEXT, WINDOW, views_of
from tests.ddp_traces import ddp_trace
from tests.figure_traces import recorded

@functools.cache
def pipeline_trace():
    """1F1B on the transformer's 4 stages, 8 microbatches: every view of a pipeline's own has something to draw."""
    from dpviz.config import RunConfig
    from dpviz.engines import engine

    return engine("pipeline").record(RunConfig(engine="pipeline", gpus=4, train=True, model="transformer",
                                               schedule="1f1b", microbatches=8, batch_size=32, data_size=96))


TRACES = {"2 GPUs": lambda: recorded(gpus=2, train=True), "8 GPUs": lambda: recorded(gpus=8, train=True),
          "16 GPUs": lambda: recorded(gpus=16, train=True), "DDP 2 ranks": lambda: ddp_trace("two_train"),
          "Pipeline 4 stages": pipeline_trace}
ENGINE_OF = {"DDP 2 ranks": "ddp", "Pipeline 4 stages": "pipeline"}  # the others: DataParallel's
# Views whose files do not yet follow the rule: (view key, engine) -> why, marked xfail(strict=False).
# Empty: every view passes today; a view that regresses while being reworked can be listed here.
NOT_YET: dict[tuple[str, str], str] = {}


def _cases():
    for view in views_of(SimpleNamespace(engine="pipeline")):  # the toolkit's views, and a pipeline's own
        if view.control == TEXT:
            continue
        for name in TRACES:
            engine = ENGINE_OF.get(name, "dp")
            if engine not in view.engines:
                continue
            why = NOT_YET.get((view.key, engine))
            marks = [pytest.mark.xfail(reason=f"{view.key}: {why}", strict=False)] if why else []
            yield pytest.param(view, name, id=f"{view.key}-{name}", marks=marks)


def _build(view, trace):
    if view.control == BATCH:
        return view.build(trace, 0)
    if view.control == SAMPLED:
        batches = view.sampled(trace)
        if not batches:
            pytest.skip(f"{view.key}: the trace sampled no batch")
        return view.build(trace, batches[0])
    if view.control == WINDOW:
        return view.build(trace)
    return view.build(trace)


@pytest.fixture(scope="module")
def no_default_template():
    """Figures built with no default template, so a template in one is one its view chose."""
    default = pio.templates.default
    pio.templates.default = None
    yield
    pio.templates.default = default


def _hex(color) -> str | None:
    """'#RRGGBB' for a plain colour; None for what this check cannot read (rgba, names, None)."""
    return color.upper() if isinstance(color, str) and len(color) == 7 and color.startswith("#") else None


def _colorscale_at(scale, t: float) -> str:
    """The colour a colourscale gives at `t` in [0, 1], as plotly paints it: the last stop at or before `t`
    mixed channel by channel with the next one. A stepped scale's two stops either side of `t` are one
    colour (its step's); a continuous one (a grey ramp) gives the grey between them."""
    t = min(max(t, 0.0), 1.0)
    at = max((i for i, (position, _) in enumerate(scale) if position <= t + 1e-12), default=0)
    (start, low), (end, high) = scale[at], scale[min(at + 1, len(scale) - 1)]
    if end <= start or _hex(low) is None or _hex(high) is None:
        return low
    share = (t - start) / (end - start)
    ends = [[int(c[k:k + 2], 16) for k in (1, 3, 5)] for c in (low, high)]
    return "#" + "".join(f"{round(a + share * (b - a)):02X}" for a, b in zip(*ends))


def _cell_color(heatmap, x, y) -> str | None:
    """The fill of the heatmap's cell at (x, y), in the heatmap's own x and y (labels or indices)."""
    xs = list(heatmap.x) if heatmap.x is not None else None
    ys = list(heatmap.y) if heatmap.y is not None else None
    try:
        i = xs.index(x) if xs is not None else int(x)
        j = ys.index(y) if ys is not None else int(y)
    except ValueError:
        return None
    z = heatmap.z[j][i]
    if z is None or z != z:  # a gap: no mark
        return None
    t = (z - heatmap.zmin) / (heatmap.zmax - heatmap.zmin)
    return _colorscale_at([list(step) for step in heatmap.colorscale], t)


def _text_on_marks(fig, trace) -> list[tuple[str, str]]:
    """(text colour, fill under it) for each written item of a trace that sets a text colour; raises
    AssertionError when the text is not on a mark (its colour must then be left to the theme)."""
    out = []
    for key in ("textfont", "insidetextfont", "outsidetextfont"):
        if key not in trace or trace[key].color is None:
            continue
        colors = trace[key].color
        if trace.type == "bar":
            assert key == "insidetextfont" or trace.textposition == "inside", \
                f"{trace.name}: bar text outside its bar sets a colour ({key})"
            fills = trace.marker.color
            n = len(trace.y) if trace.y is not None else 0
            for k in range(n):
                text_color = colors[k] if isinstance(colors, (list, tuple)) else colors
                fill = fills[k] if isinstance(fills, (list, tuple)) else fills
                out.append((text_color, fill))
        elif trace.type in ("scatter", "heatmap"):
            if trace.type == "heatmap":
                heatmaps, points = [trace], []
                for j, row in enumerate(trace.text if trace.text is not None else []):
                    points += [((trace.x[i] if trace.x is not None else i), (trace.y[j] if trace.y is not None else j))
                               for i, text in enumerate(row) if text]
            elif trace.mode == "markers+text" and trace.textposition == "middle center" and isinstance(trace.marker.color, str):
                # text on its own marker (a pipeline's microbatch tags: a number on a white square): read on that fill
                n = len(trace.x) if trace.x is not None else 0
                for k in range(n):
                    out.append((colors[k] if isinstance(colors, (list, tuple)) else colors, trace.marker.color))
                continue
            else:
                assert trace.mode == "text", f"{trace.name}: scatter text beside its markers sets a colour"
                heatmaps = [t for t in fig.data if t.type == "heatmap" and t.xaxis == trace.xaxis and t.yaxis == trace.yaxis]
                points = list(zip(trace.x, trace.y))
            assert heatmaps, f"{trace.name}: text that sets a colour, but no cells under it"
            for k, (x, y) in enumerate(points):
                text_color = colors[k] if isinstance(colors, (list, tuple)) else colors
                fill = next((c for c in (_cell_color(h, x, y) for h in heatmaps) if c), None)
                assert fill is not None, f"{trace.name}: text at ({x}, {y}) sets a colour off the cells"
                out.append((text_color, fill))
        else:
            raise AssertionError(f"{trace.type} {trace.name!r} sets a text colour ({key}) off its marks")
    return out


def _own_ink(color) -> bool:
    """A text colour that is not the page theme's: anything but unset or THEME_TEXT, which Streamlit
    replaces with its theme's body text."""
    return color is not None and color != THEME_TEXT


def _layout_ink(fig) -> list[str]:
    """Where the layout sets a text colour of its own (the theme's ink must show instead)."""
    layout, found = fig.layout, []
    for where, font in [("font", layout.font), ("title", layout.title.font), ("subtitle", layout.title.subtitle.font),
                        ("legend", layout.legend.font), ("legend title", layout.legend.title.font),
                        ("hoverlabel", layout.hoverlabel.font)]:
        if _own_ink(font.color):
            found.append(f"{where}: {font.color}")
    for name in layout:
        if name.startswith(("xaxis", "yaxis")) and layout[name] is not None:
            axis = layout[name]
            if _own_ink(axis.tickfont.color) or _own_ink(axis.title.font.color) or axis.color is not None:
                found.append(f"{name}: {axis.tickfont.color or axis.title.font.color or axis.color}")
    for annotation in layout.annotations:
        if _own_ink(annotation.font.color):
            fill = _hex(annotation.bgcolor)
            if fill is None or contrast_ratio(_hex(annotation.font.color) or "#808080", fill) < 4.5:
                found.append(f"annotation {annotation.text!r}: {annotation.font.color}")
    return found


@pytest.mark.parametrize("view,trace_name", list(_cases()))
def test_view_follows_the_page_theme(view, trace_name, no_default_template):
    fig = _build(view, TRACES[trace_name]())
    if fig is None:  # a view with nothing to draw for this trace (the pitfall view of a run with none)
        pytest.skip(f"{view.key} draws nothing for {trace_name}")
    layout = fig.layout
    # No template, no background: st.plotly_chart's theme gives them for the page's light or dark theme.
    assert not fig.layout.to_plotly_json().get("template"), f"{view.key} sets a template"
    assert layout.paper_bgcolor is None and layout.plot_bgcolor is None, f"{view.key} sets a background"
    assert _layout_ink(fig) == [], f"{view.key} sets ink off its marks"
    for trace in fig.data:
        for text_color, fill in _text_on_marks(fig, trace):
            text_hex, fill_hex = _hex(text_color), _hex(fill)
            assert text_hex and fill_hex, f"{view.key}: text {text_color} on {fill}: not plain colours"
            assert contrast_ratio(text_hex, fill_hex) >= 4.5, f"{view.key}: {text_color} on {fill}"
        # A device colour under 3:1 on white fills a bar or marker only with an outline around it.
        if trace.type in ("bar", "scatter") and "marker" in trace:
            fills = trace.marker.color if isinstance(trace.marker.color, (list, tuple)) else [trace.marker.color]
            pale = {c for c in fills if _hex(c) in DEVICE_COLORS and contrast_ratio(c, LIGHT_BACKGROUND) < 3}
            if pale and (trace.type == "bar" or (trace.mode or "").startswith("markers")):
                line = trace.marker.line
                widths = line.width if isinstance(line.width, (list, tuple)) else [line.width]  # one, or one a bar
                colors = line.color if isinstance(line.color, (list, tuple)) else [line.color]
                if trace.type == "bar" and _inside_outlined_bars(fig, trace):
                    continue  # a plate over an outlined bar (a label's ground): the bar's outline rings it
                assert all(w is None or w > 0 for w in widths), f"{view.key}: {trace.name} has no outline"
                assert all(_hex(c) is not None and contrast_ratio(c, LIGHT_BACKGROUND) >= 3 for c in colors), \
                    f"{view.key}: {trace.name}'s outline {line.color} does not show on white"


def _bars(trace) -> list[tuple]:
    """A horizontal bar trace's bars as (category, start, end, thickness); none where it gives no lengths."""
    if trace.x is None:
        return []
    n = len(trace.y)
    bases = list(trace.base) if _many(trace.base) else [trace.base or 0] * n
    widths = list(trace.width) if _many(trace.width) else [trace.width or 0.8] * n
    return [(y, b or 0, (b or 0) + x, w) for y, x, b, w in zip(trace.y, trace.x, bases, widths) if x is not None]


def _many(value) -> bool:
    return value is not None and not isinstance(value, (int, float, str))


def _inside_outlined_bars(fig, trace) -> bool:
    """Whether every bar of a horizontal `trace` lies, thinner, within a bar of another trace drawn under it with a
    dark outline: the outline that shows it on white is that bar's."""
    if trace.orientation != "h" or trace.y is None or len(trace.y) == 0:
        return False
    under = []
    for other in fig.data[:list(fig.data).index(trace)]:
        if other.type != "bar" or other.orientation != "h" or other.y is None or len(other.y) == 0:
            continue
        line = other.marker.line
        if line.width and _hex(line.color) and contrast_ratio(line.color, LIGHT_BACKGROUND) >= 3:
            under += _bars(other)
    return all(any(y == uy and us <= s and e <= ue and w < uw for uy, us, ue, uw in under)
               for y, s, e, w in _bars(trace))


def test_device_colours_show_on_both_pages():
    """The palette's rule, restated here where the views are checked: 3:1 on the dark page by the fill,
    on white by the fill or by the OUTLINE that every device-coloured bar and marker has."""
    for color in device_colors(16):
        assert contrast_ratio(color, DARK_BACKGROUND) >= 3
        assert max(contrast_ratio(color, LIGHT_BACKGROUND), contrast_ratio(OUTLINE, LIGHT_BACKGROUND)) >= 3


def test_the_checks_catch_ink_off_the_marks():
    """The checks above fail on what they are for: ink in the layout, on an annotation, beside a mark."""
    import plotly.graph_objects as go

    from dpviz.figures.layout import styled

    fig = styled(go.Figure(go.Bar(x=[0], y=[1], text=["1"], textposition="outside", textfont_color="#222222")), "t", ["n"])
    fig.add_annotation(text="note", font_color="#555555", showarrow=False)
    fig.update_layout(title_subtitle_font_color="#555555")
    assert [line.split(":")[0] for line in _layout_ink(fig)] == ["subtitle", "annotation 'note'"]
    with pytest.raises(AssertionError, match="outside its bar"):
        _text_on_marks(fig, fig.data[0])
    on_yellow = go.Bar(x=[0], y=[1], text=["1"], marker_color="#F0E442", insidetextfont_color="#FFFFFF")
    assert _text_on_marks(fig, on_yellow) == [("#FFFFFF", "#F0E442")]  # and 1.3:1 fails the 4.5 check


def test_styled_wraps_to_the_narrowest_chart_and_makes_room_for_what_it_adds():
    import plotly.graph_objects as go

    from dpviz.figures.layout import styled, title_block_px
    from dpviz.figures.sizes import BASE_TOP_PX, GAP_PX, NARROWEST_PX, SUBTITLE_SIZE, TITLE_SIZE
    from dpviz.figures.text_fit import SOFT_BREAK, unwrap, visible_length

    notes = ["simulated GPUs: CPU threads stand in for 8 devices",
             "spans shorter than 1/200 of the window are drawn that long; the hover gives the measured time"]
    short = styled(go.Figure(go.Bar(x=[0], y=[1])), "A short title", notes[:1])
    long = styled(go.Figure(go.Bar(x=[0], y=[1])), "A title far too long to fit on one line of a narrow chart", notes)
    assert SOFT_BREAK not in short.layout.title.text + short.layout.title.subtitle.text
    assert short.layout.margin.t == BASE_TOP_PX and short.layout.height == 520
    for text, size in ((long.layout.title.text, TITLE_SIZE), (long.layout.title.subtitle.text, SUBTITLE_SIZE)):
        lines = text.split(SOFT_BREAK)
        assert len(lines) >= 2 and all(visible_length(line) * 0.45 * size <= NARROWEST_PX - 10 for line in lines)
    assert unwrap(long.layout.title.subtitle.text) == " · ".join(notes)  # no word lost or changed
    # Five lines of title block where the short one has two: the top margin holds them all (never the
    # plot under the title), and the height grows as much, so the plot keeps its size.
    assert long.layout.margin.t >= title_block_px(long) + GAP_PX > short.layout.margin.t
    assert long.layout.height - short.layout.height == long.layout.margin.t - short.layout.margin.t


def test_styled_puts_an_unplaced_legend_between_the_subtitle_and_the_plot():
    import plotly.graph_objects as go

    from dpviz.figures.layout import styled, title_block_px
    from dpviz.figures.legends import legend_rows
    from dpviz.figures.sizes import LEGEND_ROW_PX

    bars = [go.Bar(x=[0], y=[1], name=f"GPU {d}") for d in range(16)]
    fig = styled(go.Figure(bars), "Rows per GPU", ["simulated GPUs: CPU threads stand in for 16 devices"])
    legend = fig.layout.legend
    assert (legend.orientation, legend.y, legend.yanchor, legend.yref) == ("h", 1, "bottom", "paper")
    rows = legend_rows([f"GPU {d}" for d in range(16)])
    assert rows >= 3  # sixteen entries do not fit one row of a 468 px chart
    assert fig.layout.margin.t >= title_block_px(fig) + rows * LEGEND_ROW_PX  # above the plot, under the title
    placed = styled(go.Figure(bars).update_layout(legend=dict(x=1.02, y=1)), "Rows per GPU", [])
    assert placed.layout.legend.orientation is None  # a view's own placement is kept


def test_presentation_enlarges_every_type_size_and_the_margins_to_match():
    import plotly.graph_objects as go

    from dpviz.figures.layout import styled
    from dpviz.figures.presenting import presentation
    from dpviz.figures.sizes import PROJECTOR_PX
    from dpviz.figures.text_fit import unwrap, wrap

    fig = styled(go.Figure([go.Bar(x=["GPU 0"], y=[1], name="GPU 0", text=["1"], insidetextfont=dict(size=12)),
                            go.Bar(x=["GPU 1"], y=[2], name="GPU 1")]),
                 "Rows per GPU in each of 4 batches, none idle", ["simulated GPUs: CPU threads stand in for 2 devices"])
    fig.add_annotation(text="a note", x=0, y=1, showarrow=False, font=dict(size=12))
    big = presentation(fig, scale=1.5, room_px=10_000)  # room enough: the plot keeps its height
    assert big is not fig and fig.layout.font.size == 16  # a copy: the page's figure is untouched
    layout = big.layout
    assert layout.font.size == 24 and layout.title.font.size == 30 and layout.title.subtitle.font.size == 21
    assert layout.legend.font.size == 21 and layout.hoverlabel.font.size == 22.5
    assert layout.xaxis.tickfont.size == 21 and layout.annotations[0].font.size == 18
    assert big.data[0].insidetextfont.size == 18
    assert unwrap(layout.title.text) == unwrap(fig.layout.title.text)
    # Wrapped again at the larger size, for the projector's chart (1024 px window), which is wider than the narrowest.
    assert layout.title.text == wrap(unwrap(fig.layout.title.text), 30, PROJECTOR_PX)
    assert wrap(unwrap(fig.layout.title.text), 30).count("<br") > layout.title.text.count("<br")
    for side in "lrb":
        assert layout.margin[side] == round(fig.layout.margin[side] * 1.5)
    assert layout.margin.t > fig.layout.margin.t
    plot = lambda f: f.layout.height - f.layout.margin.t - f.layout.margin.b
    assert plot(big) == plot(fig)  # the margins grow, the plot keeps its height
    with pytest.raises(ValueError, match="scale must be positive"):
        presentation(fig, scale=0)


def test_presentation_fits_the_projectors_first_screen_giving_up_at_most_a_share_of_the_plot():
    """A chart taller than the room under the tabs: its plot gives up what it must, never below SHRINK_FLOOR of
    its height, the margins kept whole; a stacked figure keeps the room between its panels for their words."""
    from dpviz.figures import sample_map_figure
    from dpviz.figures.presenting import FOLD_FLOOR, SHRINK_FLOOR, WORDS_FOLD_FLOOR, presentation, tick_room_px

    plot = lambda f: f.layout.height - f.layout.margin.t - f.layout.margin.b
    view = lambda key, gpus="2 GPUs": _build(next(v for v in VIEWS if v.key == key), TRACES[gpus]())
    worded = view("memory")  # bytes written in its grid's cells: at most 1 - WORDS_FOLD_FLOOR of their room given
    tight, roomy = presentation(worded, room_px=300), presentation(worded, room_px=10_000)
    assert WORDS_FOLD_FLOOR * plot(roomy) - 1 <= plot(tight) < plot(roomy)
    assert not tight.layout.title.subtitle.text  # its notes moved under the plot first
    # Its strip of eight GPUs' rows, named at the larger type, keeps the room its names need however tight the room:
    # squeezed with the plot, "GPU 1" was written over "GPU 0"
    strip = presentation(view("split", "8 GPUs"), room_px=300)
    assert tick_room_px(strip, plot(strip)) <= plot(strip) + 1  # the height is whole pixels
    for fig in (sample_map_figure(TRACES["8 GPUs"]()),):
        roomy = presentation(fig, room_px=10_000)
        # Room for the whole chart less 40 px: the plot gives them up, its margins whole. 300 px: the plot would run
        # past the room, so its notes and legend go under it, and it gives up what it must, to FOLD_FLOOR.
        fitted = presentation(fig, room_px=roomy.layout.height - 40)
        assert (fitted.layout.margin.t, fitted.layout.margin.b) == (roomy.layout.margin.t, roomy.layout.margin.b)
        assert SHRINK_FLOOR * plot(roomy) - 1 <= plot(fitted) < plot(roomy) and fitted.layout.height < roomy.layout.height
        folded = presentation(fig, room_px=300)
        assert folded.layout.margin.t < roomy.layout.margin.t and folded.layout.margin.b > roomy.layout.margin.b
        assert FOLD_FLOOR * plot(roomy) - 1 <= plot(folded) < plot(roomy)  # its rows' names keep what they need
    maps = sample_map_figure(TRACES["8 GPUs"]())
    gap = lambda f: (f.layout.yaxis.domain[0] - f.layout.yaxis2.domain[1]) * plot(f)
    # the room between the panels kept whole where the plot gave up height, grown where a panel's title, wrapped to a
    # plot a legend beside it narrowed, takes more lines
    assert gap(presentation(maps, room_px=300)) >= gap(presentation(maps, room_px=10_000)) - 1


def _hatches_without_fill(fig) -> list[str]:
    """Hatches that would draw lines alone on the page: a marker pattern or a scatter's fillpattern with a
    shape but neither fillmode "overlay" nor a bgcolor. Plotly's own template sets overlay; the page's
    theme replaces that template, and such a hatch draws white stripes on nothing (no device colour)."""
    found = []
    for trace in fig.data:
        patterns = []
        if "marker" in trace and trace.marker is not None and "pattern" in trace.marker:
            patterns.append(("marker.pattern", trace.marker.pattern))
        if "fillpattern" in trace:
            patterns.append(("fillpattern", trace.fillpattern))
        for where, pattern in patterns:
            shapes = pattern.shape if isinstance(pattern.shape, (list, tuple)) else [pattern.shape]
            if any(shapes) and pattern.fillmode != "overlay" and pattern.bgcolor is None:
                found.append(f"{trace.type} {trace.name!r}: {where}")
    return found


@pytest.mark.parametrize("view,trace_name", list(_cases()))
def test_every_hatch_keeps_its_fill_without_a_template(view, trace_name, no_default_template):
    fig = _build(view, TRACES[trace_name]())
    if fig is None:
        pytest.skip(f"{view.key} draws nothing for {trace_name}")
    assert _hatches_without_fill(fig) == []


def test_the_hatch_check_catches_a_hatch_that_relies_on_the_template():
    import plotly.graph_objects as go

    bare = go.Figure([go.Bar(x=[0], y=[1], name="GPU 8", marker=dict(color="#00DD55", pattern=dict(shape="/"))),
                      go.Scatter(x=[0, 1], y=[0, 1], fill="toself", name="band", fillpattern=dict(shape="/")),
                      go.Bar(x=[0], y=[1], name="GPU 0", marker=dict(color="#0072B2", pattern=dict(shape="")))])
    assert _hatches_without_fill(bare) == ["bar 'GPU 8': marker.pattern", "scatter 'band': fillpattern"]
    bare.update_traces(marker_pattern_fillmode="overlay", selector=dict(type="bar"))
    bare.update_traces(fillpattern_bgcolor="#00DD55", selector=dict(type="scatter"))
    assert _hatches_without_fill(bare) == []


def test_wrap_keeps_numbered_phrases_whole_and_breaks_at_clauses():
    """The titles that broke badly: a number stays with its words, a clause's end is the break, and
    no line is one or two short words left over."""
    from dpviz.figures.sizes import TITLE_SIZE
    from dpviz.figures.text_fit import SOFT_BREAK, wrap

    examples = {
        "Batch 0 of 4: 30 rows scattered over 10 of 16 GPUs<br>gathered on GPU 0": ["10 of 16 GPUs"],
        "Batch 0 of 150: 30 rows scattered over 8 of 8 GPUs<br>gathered on GPU 0": ["8 of 8 GPUs", "Batch 0 of 150:"],
        "Memory per GPU after each phase of batch 0 of 150: GPU 0 holds the most": ["batch 0 of 150:"],
        "Step 1 of 4: the batch's 30 rows are cut into 10 chunks in order, one copied to each of GPUs 0-9; "
        "GPUs 10-15 get none": ["10 chunks", "GPUs 0-9;"],
    }
    for title, phrases in examples.items():
        for size in (TITLE_SIZE, TITLE_SIZE * 1.35):
            lines = [line for part in wrap(title, size).split("<br>") for line in part.split(SOFT_BREAK)]
            for phrase in phrases:
                assert any(phrase in line for line in lines), (phrase, lines)
            assert all(len(line.split()) > 2 or len(line) > 12 for line in lines), lines
    assert wrap("Batch 0 of 4: 30 rows scattered over 10 of 16 GPUs", TITLE_SIZE).split(SOFT_BREAK)[0] == "Batch 0 of 4:"


def test_legend_rows_count_entries_as_plotly_lays_them_out():
    """Plotly puts a legend that overflows one row in columns as wide as its widest entry, and a
    grouped legend's rows 10 px apart: styled() keeps room for all of them (16 GPUs: 4 rows, not 3)."""
    import plotly.graph_objects as go

    from dpviz.figures.layout import styled, title_block_px
    from dpviz.figures.legends import legend_px, legend_rows

    names = [f"GPU {d}" for d in range(16)]
    assert legend_rows(["GPU 0", "GPU 1"]) == 1
    assert legend_rows(names) == 6  # three columns of "GPU 10" in 358 px, measured in Chromium
    grouped = go.Figure([go.Bar(x=[0], y=[1], name=n, legendgroup=n) for n in names])
    plain = go.Figure([go.Bar(x=[0], y=[1], name=n) for n in names])
    assert legend_px(grouped) > legend_px(plain) >= 6 * 21  # each row 21 px at 14 px type, the groups 10 more
    fig = styled(grouped, "Rows per GPU", ["simulated GPUs: CPU threads stand in for 16 devices"])
    assert fig.layout.margin.t >= title_block_px(fig) + legend_px(fig)


def _room_above(fig, width_px):
    """(top of the legend, bottom of the title block, top of the plot) in px from the figure's top, for
    a horizontal legend above the plot on a chart `width_px` wide, from the layout's numbers as styled() and
    presentation() set them."""
    from dpviz.figures.layout import title_block_px
    from dpviz.figures.legends import legend_px

    layout = fig.layout
    plot = layout.height - layout.margin.t - layout.margin.b
    lifted = (layout.legend.y - 1) * plot
    height = legend_px(fig, width_px)
    top = layout.margin.t - lifted - (0 if layout.legend.yanchor == "top" else height)
    return top, title_block_px(fig), layout.margin.t, height


@pytest.mark.parametrize("view", [v for v in VIEWS if v.control != TEXT], ids=lambda v: v.key)
def test_presentation_keeps_the_legend_between_the_subtitle_and_the_plot(view, no_default_template):
    """At 16 GPUs, with every type 1.35 times larger: a legend above the plot starts under the
    re-wrapped subtitle and ends, all its rows counted at the chart it is laid out for (the narrowest;
    presented, the projector's), above the plot."""
    from dpviz.figures.presenting import presentation
    from dpviz.figures.sizes import NARROWEST_PX, PROJECTOR_PX

    fig = _build(view, TRACES["16 GPUs"]())
    if fig is None:
        pytest.skip(f"{view.key} draws nothing for 16 GPUs")
    for shown, width in ((fig, NARROWEST_PX), (presentation(fig), PROJECTOR_PX)):
        layout = shown.layout
        if not (layout.legend.orientation == "h" and layout.legend.y is not None and layout.legend.y >= 1):
            continue
        top, block, plot_top, height = _room_above(shown, width)
        assert top >= block, f"{view.key}: the legend's top {top:.0f} px is over the subtitle's end {block} px"
        assert top + height <= plot_top + 1, f"{view.key}: the legend's rows reach into the plot"


def test_presentation_grows_the_room_between_stacked_panels():
    """The sample map's panels: the gap between them grows with the type (more where its axis title and
    the lower panel's title take more lines at the larger size), each panel keeping its pixels."""
    from dpviz.figures import sample_map_figure
    from dpviz.figures.presenting import presentation

    fig = sample_map_figure(TRACES["8 GPUs"]())
    big = presentation(fig, room_px=10_000)  # room enough: each panel keeps its pixels
    plot = lambda f: f.layout.height - f.layout.margin.t - f.layout.margin.b
    gap = lambda f: (f.layout.yaxis.domain[0] - f.layout.yaxis2.domain[1]) * plot(f)
    panel = lambda f: (f.layout.yaxis2.domain[1] - f.layout.yaxis2.domain[0]) * plot(f)
    assert gap(big) >= gap(fig) * 1.35 - 1
    lines = lambda text: text.count("<br")  + 1
    words = (big.layout.xaxis.tickfont.size + big.layout.xaxis.title.font.size * lines(big.layout.xaxis.title.text)
             + big.layout.annotations[1].font.size * lines(big.layout.annotations[1].text)) * 1.3
    assert gap(big) >= words  # the top panel's ticks and axis title, then the bottom panel's title
    assert panel(big) == pytest.approx(panel(fig), abs=1)


@pytest.mark.parametrize("kinds", [3, 11])
def test_presenting_moves_a_legend_over_a_plot_past_the_first_screen_beside_it(kinds):
    """A plot that runs past the room: its legend of colours goes to the plot's right, where the first screen shows
    it (under the plot it was off it), from the plot's bottom, or from its top where it stands taller than the plot
    (the pipeline's eleven kinds in its Timeline); what went under the plot starts under such a legend's end."""
    import plotly.graph_objects as go

    from dpviz.figures.layout import styled
    from dpviz.figures.presenting import presentation
    from dpviz.figures.presenting_fold import NOTES
    from dpviz.figures.sizes import PROJECTOR_PX
    from dpviz.figures.text_fit import text_px

    fig = go.Figure([go.Bar(x=["a", "b"], y=[k + 1, k + 2], name=f"kind {k + 1}") for k in range(kinds)])
    styled(fig.update_layout(barmode="stack"), "A chart", ["a note under its title"], height=700)
    assert fig.layout.legend.orientation == "h"  # over the plot, where styled() put it
    out = presentation(fig, room_px=300)
    layout = out.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    assert layout.legend.orientation == "v" and layout.legend.x == 1 and layout.legend.xanchor == "left"
    size = layout.legend.font.size
    widest = max(text_px(f"kind {k + 1}", size) for k in range(kinds))
    assert layout.margin.r >= 40 + widest  # its swatches and words inside the chart
    assert PROJECTOR_PX - layout.margin.l - layout.margin.r >= PROJECTOR_PX / 3  # the plot keeps a third
    rows_px = kinds * (1.3 * size + 6)
    if rows_px < plot_px:
        assert (layout.legend.y, layout.legend.yanchor) == (0, "bottom")
    else:  # from the plot's top down, past its bottom: what follows under the plot starts under it
        assert (layout.legend.y, layout.legend.yanchor) == (1, "top")
        (notes,) = [a for a in layout.annotations if a.name == NOTES]
        assert -notes.yshift >= rows_px - plot_px
        assert layout.margin.b >= rows_px - plot_px

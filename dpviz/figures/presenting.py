"""Presenting: `presentation(fig)` makes a copy of a styled figure for a projector, its type larger and the
room around it grown to match, so the plot keeps its share of the chart.

The page shows it when Present is on; `tick_room_px` is the height at which a y axis's own labels clear each
other, which views that name rows on an axis use at their own size too. A text trace sized to its cells says
so with CELL_TEXT in its meta, and keeps its size; so does an annotation named CELL_NOTE (One step's boxes).
"""
from __future__ import annotations

import math
import re

import plotly.graph_objects as go

from dpviz.figures.layout import over_plot_px, subplot_titles, title_block_px, wrap_subplot_titles
from dpviz.figures.legends import ENTRY_GAP_PX, columns_joined, legend_entries, legend_px
from dpviz.figures.presenting_boxes import CELL_NOTE, fit_box_notes
from dpviz.figures.presenting_fold import (controls_over_plot, controls_under, legend_beside, legend_under,
                                          subtitle_under)
from dpviz.figures.sizes import (AXIS_TITLE_SIZE, BASE_TOP_PX, FONT_SIZE, GAP_PX, LEGEND_SIZE, LINE_EM, MARGIN, NARROWEST_PX,
                                 PROJECTOR_PX, PROJECTOR_ROOM_PX, SUBTITLE_SIZE, TICK_SIZE, TITLE_SIZE, TOP_PAD_PX)
from dpviz.figures.text_fit import SOFT_BREAK, line_count, text_px, unwrap, widest_line_px, wrap

_SIZED = ("textfont", "insidetextfont", "outsidetextfont")


def _scaled(size, scale: float):
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return round(size * scale, 1)
    if isinstance(size, (list, tuple)):
        return [_scaled(s, scale) for s in size]
    return size


# A text trace sized to fit its cells (the sample map's row ids) says so in its meta: presentation()
# leaves its size, since larger numbers would run together.
CELL_TEXT = {"sized": "to its cells"}
# The name of an annotation of words in a box sized to hold them: it keeps its size too (presenting_boxes)


def _legend_above(fig: go.Figure) -> bool:
    legend = fig.layout.legend
    return (legend.orientation == "h" and legend.y is not None and legend.y >= 1 and legend.yref in (None, "paper")
            and bool(legend_entries(fig)))


def _legends_under(fig: go.Figure, plot_px: float) -> dict[str, float]:
    """Each horizontal legend hung under the plot (legends.legend_under_plot): its name and its gap in pixels
    from the plot's bottom edge."""
    under = {}
    for name in [k for k in fig.layout if re.match(r"legend\d*$", k)]:
        legend = fig.layout[name]
        if (legend.orientation == "h" and legend.y is not None and legend.y < 0 and legend.yanchor == "top"
                and legend.yref in (None, "paper") and legend_entries(fig, name)):
            under[name] = -legend.y * plot_px
    return under


def _gap_text_px(fig: go.Figure, lower: list[float], upper: list[float]) -> float:
    """Pixels the text in the gap between two stacked panels takes: the upper panel's x ticks and
    axis title (as wrapped), then the lower panel's subplot title (as wrapped), with gaps between."""
    px = 24.0
    for name in [k for k in fig.layout if re.match(r"xaxis\d*$", k)]:
        axis = fig.layout[name]
        anchor = fig.layout["yaxis" + (axis.anchor or "y")[1:]] if axis.anchor and axis.anchor != "free" else None
        if anchor is not None and anchor.domain and anchor.domain[0] == upper[0] and axis.showticklabels is not False:
            title = (axis.title.font.size or AXIS_TITLE_SIZE) * LINE_EM * line_count(axis.title.text or "")
            px = max(px, (axis.tickfont.size or TICK_SIZE) * LINE_EM + title + 24)
    titles = [a for a in subplot_titles(fig) if abs(a.y - lower[1]) < 1e-6]
    return px + max((line_count(a.text) * (a.font.size or FONT_SIZE) * LINE_EM for a in titles), default=0) + 8


def _stretch_gaps(fig: go.Figure, plot_px: float, scale: float, panel: float = 1.0, apply: bool = True) -> float:
    """Grow the room between stacked panels by `scale` (their axis labels and headings grow with the
    type), each panel keeping its height in pixels times `panel`; what is placed on the paper moves with
    its panel. Returns the plot area's new height (and, with `apply` off, changes nothing)."""
    names = [k for k in fig.layout if re.match(r"yaxis\d*$", k) and fig.layout[k].domain]
    spans = sorted({tuple(fig.layout[k].domain) for k in names})
    if len(spans) < 2:
        return plot_px * panel
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    grow = [scale] + [max(scale, _gap_text_px(fig, lower, upper) / max((upper[0] - lower[1]) * plot_px, 1))
                      for lower, upper in zip(merged, merged[1:])] + [scale]
    new_px, starts, previous = 0.0, [], 0.0
    for (a, b), factor in zip(merged, grow):
        new_px += (a - previous) * plot_px * factor
        starts.append(new_px)
        new_px += (b - a) * plot_px * panel
        previous = b
    new_px += (1 - previous) * plot_px * scale
    if not apply:
        return new_px

    def moved(y):
        if not isinstance(y, (int, float)) or isinstance(y, bool):
            return y
        edge, at = 0.0, 0.0
        for (a, b), start, factor in zip(merged, starts, grow):
            if y < a:
                return (at + (y - edge) * plot_px * factor) / new_px
            if y <= b:
                return (start + (y - a) * plot_px * panel) / new_px
            edge, at = b, start + (b - a) * plot_px * panel
        return (at + (y - edge) * plot_px * scale) / new_px

    for k in names:
        a, b = fig.layout[k].domain
        fig.layout[k].domain = [max(0.0, moved(a)), min(1.0, moved(b))]
    for item in list(fig.layout.annotations) + list(fig.layout.shapes):
        if item.yref == "paper":
            for key in ("y", "y0", "y1"):
                if key in item and item[key] is not None:
                    item[key] = moved(item[key])
    return new_px


TICK_GAP_PX = 4  # between two neighbouring tick labels of a y axis, one line's bottom to the next one's top
# A line's own height, in ems of its type: a capital's top to a descender's bottom fits in it (0.93 em in the house's
# fonts); the rest of LINE_EM is the leading between the lines of one label, which two labels (sixteen GPUs' lanes)
# need not keep between them besides TICK_GAP_PX.
GLYPH_EM = 1.0


def _category_rows(fig: go.Figure, axis_name: str) -> list[str] | None:
    """The rows the traces on the y axis `axis_name` name by category (strings: a heatmap's rows, horizontal bars'
    names), in order of first appearance as plotly lays them out; None where fewer than two are named."""
    ref = "y" + axis_name[len("yaxis"):]
    rows: dict[str, None] = {}
    for trace in fig.data:
        named = trace.type == "heatmap" or (trace.type == "bar" and trace.orientation == "h")
        if named and (trace.yaxis or "y") == ref and trace.y is not None and all(isinstance(v, str) for v in trace.y):
            rows.update(dict.fromkeys(str(v) for v in trace.y))
    return list(rows) if len(rows) > 1 else None


def tick_room_px(fig: go.Figure, plot_px: float) -> float:
    """The plot area's height in pixels at which no two neighbouring labels of a y axis that names its rows (tickvals
    and ticktext, lines as written; a label every dtick; a heatmap's named rows) overlap: `plot_px` if they fit."""
    need = plot_px
    for name in [k for k in fig.layout if re.match(r"yaxis\d*$", k)]:
        axis = fig.layout[name]
        named = _category_rows(fig, name) if axis.range is None and axis.tickvals is None else None
        if named:  # rows named by their categories (the split's strip of ranks, a pitfall's bars): one row each
            ticks, span = list(enumerate(named)), float(len(named))
        elif axis.range is None:
            continue
        else:
            low, high = sorted(float(v) for v in axis.range)
            span = high - low
            if axis.tickvals is not None and axis.ticktext is not None:
                ticks = sorted(zip((float(v) for v in axis.tickvals), axis.ticktext))
            elif axis.tickmode == "linear" and axis.dtick and axis.type in (None, "linear"):  # a label every dtick
                step, origin = float(axis.dtick), float(axis.tick0 or 0)
                start = origin + math.ceil((low - origin) / step) * step
                ticks = [(start + i * step, "0") for i in range(min(int((high - start) // step) + 1, 1000))]
            else:
                continue
        share = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        size = axis.tickfont.size or TICK_SIZE
        for (a, first), (b, second) in zip(ticks, ticks[1:]):
            if b - a <= 0 or span <= 0:
                continue
            px = ((line_count(first) + line_count(second)) / 2 - 1) * size * LINE_EM + size * GLYPH_EM + TICK_GAP_PX
            need = max(need, px * span / ((b - a) * share))
    return need


def _thin_names(fig: go.Figure, plot_px: float) -> None:
    """An x axis that names its columns (categories, tickvals the same as ticktext) keeps every k-th
    name when the larger type no longer fits them side by side on the narrowest chart."""
    for axis in [fig.layout[k] for k in fig.layout if re.match(r"xaxis\d*$", k)]:
        if axis.type != "category" or axis.categoryarray is None or axis.tickvals is None or axis.ticktext is None:
            continue
        names = [str(c) for c in axis.categoryarray]
        if [str(v) for v in axis.tickvals] != [str(t) for t in axis.ticktext] or not names:
            continue
        share = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        widest = max(text_px(n, axis.tickfont.size or TICK_SIZE) for n in names) + TICK_GAP_PX
        step = max(1, math.ceil(widest / (plot_px * share / len(names))))
        shown = set(str(v) for v in axis.tickvals)
        kept = [n for n in names[::step] if step > 1 or n in shown]
        if len(kept) < len(shown):
            axis.tickvals, axis.ticktext = kept, kept


def _hung_under(annotation) -> bool:
    """Whether `annotation` is a note hung from the paper's bottom, under the plot."""
    return (annotation.yref == "paper" and annotation.y is not None and annotation.y <= 0
            and annotation.yanchor == "top" and bool(annotation.text))


def _hang_lower(fig: go.Figure, px: float) -> None:
    """Every note hung under the plot moved `px` further down (what is above it, an axis title, took more lines)."""
    for annotation in fig.layout.annotations:
        if _hung_under(annotation):
            annotation.yshift = (annotation.yshift or 0) - px


def _wrap_y_titles(fig: go.Figure, plot_px: float, scale: float) -> None:
    """A y axis's title longer than its panel is high, at the larger type, wrapped to the panel's height: written
    across it, it ran up into the chart's title (a short panel of a stacked figure). Its lines stand side by side."""
    for axis in [fig.layout[name] for name in fig.layout if re.match(r"yaxis\d*$", name)]:
        if not axis.title.text:
            continue
        panel = plot_px * ((axis.domain[1] - axis.domain[0]) if axis.domain else 1.0)
        size = axis.title.font.size or _scaled(AXIS_TITLE_SIZE, scale)
        if widest_line_px(axis.title.text, size) > panel:
            axis.title.text = wrap(unwrap(axis.title.text), size, max(panel, 1))


def _wrap_x_titles(fig: go.Figure, width_px: float, scale: float) -> None:
    """Every x axis's title wrapped again at its larger type, to a plot `width_px` wide."""
    for axis in [fig.layout[name] for name in fig.layout if re.match(r"xaxis\d*$", name)]:
        if axis.title.text:
            axis.title.text = wrap(unwrap(axis.title.text), axis.title.font.size or _scaled(AXIS_TITLE_SIZE, scale), width_px)


def _bottom_title_growth_px(fig: go.Figure, out: go.Figure, scale: float) -> float:
    """The pixels the bottom panel's x axis title grew by beyond `scale`: the lines it gained when wrapped again at
    its larger type (a title on one line in the plain chart takes two on a projector's)."""
    lowest = min((out.layout[k].domain[0] for k in out.layout if re.match(r"yaxis\d*$", k) and out.layout[k].domain),
                 default=0.0)
    grown = 0.0
    for name in [k for k in out.layout if re.match(r"xaxis\d*$", k)]:
        axis, before = out.layout[name], fig.layout[name]
        anchor = out.layout["yaxis" + (axis.anchor or "y")[1:]] if axis.anchor and axis.anchor != "free" else None
        at_bottom = anchor is None or not anchor.domain or anchor.domain[0] <= lowest + 1e-9
        if at_bottom and axis.title.text and axis.showticklabels is not False:
            extra = line_count(axis.title.text) - line_count(before.title.text or "")
            grown = max(grown, extra * (axis.title.font.size or _scaled(AXIS_TITLE_SIZE, scale)) * LINE_EM)
    return grown


def _notes_below_px(fig: go.Figure) -> float:
    """The bottom margin a note under the plot (an annotation hung from the paper's bottom) needs."""
    need = 0.0
    for a in fig.layout.annotations:
        if _hung_under(a):
            need = max(need, -(a.yshift or 0) + line_count(a.text) * (a.font.size or FONT_SIZE) * LINE_EM + 12)
    return need


# The least share of its height a plot keeps to fit the projector's first screen: marks and the words on them
# stay readable.
SHRINK_FLOOR = 0.7


def _words_in_plot(fig: go.Figure) -> bool:
    """Whether the plot holds words laid on its data (a note on a box, numbers in cells, text marks): they need
    the room they were drawn in, so the plot keeps its height. Bars' labels hide where they no longer fit."""
    return (any(a.text and a.yref != "paper" and not str(a.yref).endswith("domain")  # unset: the y axis
                for a in fig.layout.annotations)
            or any(t.type != "bar" and (("mode" in t and t.mode and "text" in t.mode)
                                        or ("texttemplate" in t and t.texttemplate)) for t in fig.data))


# Where the plot would still run past the first screen with its notes and legend moved under it: the least share of
# its height it keeps (its marks still read); with words laid on its data, a larger share (a cell's number, sized
# to its cell with room around it, still fits); words in boxes sized to hold them (One step's) a share that keeps
# the fullest box most of its lines, the rest in its hover (presenting_boxes).
FOLD_FLOOR, WORDS_FOLD_FLOOR, BOXES_FOLD_FLOOR = 0.5, 0.7, 0.6


def _notes_in_boxes(fig: go.Figure) -> bool:
    return any(a.name == CELL_NOTE for a in fig.layout.annotations)


def _fold(out: go.Figure, top: float, bottom: float, room_px: float, above: bool, left: float, right: float, *,
          old_block: float, over: float, scale: float, plot_px: float, least_width: float,
          legend_own: float = 0.0) -> tuple[float, float, float, float | None]:
    """Move what sits between the title and the plot out of the way, the subtitle's notes first (under the plot),
    then a legend above the plot (beside the plot where it is narrow, so its colours stay on the first screen, else
    under it), until the plot's top leaves it `room_px` (or nothing is left to move); the plot about `plot_px` high,
    and beside a legend at least `least_width` wide (what its cells' words were sized for); `legend_own`, the
    pixels the legend above the plot and the room over it take.
    Returns the new top, bottom and right margins, and the legend's gap under the plot in pixels (None when it
    stayed above or went beside)."""
    subtitle = line_count(out.layout.title.subtitle.text or "") * (out.layout.title.subtitle.font.size or 0) * LINE_EM
    # the legend's own rows and the room over it, a gap kept under the title: what lies between the legend and the
    # plot (a panel's title, the flow's batch names) stays there
    legend_room = min(max(top - old_block - GAP_PX * scale - over, 0.0), legend_own) if above else 0.0
    move_notes = subtitle > 0
    move_legend = above and top - subtitle > room_px
    moved = None
    if move_legend:
        beside = legend_beside(out, left, right, PROJECTOR_PX, plot_px, least_px=least_width)
        if beside is None:
            moved, bottom = legend_under(out, bottom, PROJECTOR_PX)
        else:  # what is moved under the plot next starts under a legend that hangs past the plot's bottom
            right, hang = beside
            bottom = max(bottom, hang)
        top -= legend_room
    if move_notes:
        bottom = subtitle_under(out, bottom, PROJECTOR_PX, left)
        top -= old_block - title_block_px(out)
    return top, bottom, right, moved


# The most of the plot's width one legend entry takes: the chart on a projector is narrower than PROJECTOR_PX where
# the page keeps its sidebar, and an entry as wide as the plot ran off its right edge.
ENTRY_SHARE = 0.75


# Around a word in a cell of a category axis: the cell's gaps (xgap) and a little air either side.
CELL_AIR_PX = 12


def _category_cells_px(fig: go.Figure, trace) -> float | None:
    """The plot's width that text trace's words need where each sits in a column of a category x axis (Memory's
    grid): as many columns as the axis has, each as wide as the widest word and its air. None for any other words
    (bars' labels on a time axis): what they need is not known here."""
    axis = fig.layout["xaxis" + (trace.xaxis or "x")[1:]]
    if trace.type != "scatter" or axis.type != "category" or trace.text is None:
        return None
    columns = len(axis.categoryarray) if axis.categoryarray else len(set(trace.x))
    size = trace.textfont.size if isinstance(trace.textfont.size, (int, float)) else FONT_SIZE
    return columns * (max((text_px(str(t), size) for t in trace.text), default=0) + CELL_AIR_PX)


def _sized_for_px(fig: go.Figure) -> float:
    """The least plot width for the words `fig` sized to its cells (CELL_TEXT): in columns of a category axis, what
    its columns' widest words take; any other, the plot's width on the narrowest chart (they fit no narrower
    plot). 0 where it holds none."""
    sized = [trace for trace in fig.data if trace.meta == CELL_TEXT]
    if not sized:
        return 0.0
    needs = [_category_cells_px(fig, trace) for trace in sized]
    if all(need is not None for need in needs):
        return max(needs)
    margin = fig.layout.margin
    return NARROWEST_PX - (margin.l if margin.l is not None else MARGIN["l"]) - (margin.r if margin.r is not None else MARGIN["r"])


def _wrap_legend_entries(fig: go.Figure, plot_px: float) -> None:
    """A legend entry wider than the plot at the larger type (ZeRO-1's 'broadcast: the updated shards sent from their
    owners') on lines that fit it: plotly cuts an entry at the chart's edge."""
    for trace in fig.data:
        if "showlegend" not in trace or trace.showlegend is False or not trace.name or "<br>" in trace.name:
            continue
        legend = fig.layout[trace.legend or "legend"]
        size = legend.font.size or LEGEND_SIZE
        if ENTRY_GAP_PX + text_px(trace.name, size) > ENTRY_SHARE * plot_px:
            trace.name = wrap(trace.name, size, ENTRY_SHARE * plot_px - ENTRY_GAP_PX).replace(SOFT_BREAK, "<br>")


def _longest_title_block_px(fig: go.Figure) -> float:
    """The title block of the frame whose title takes the most lines (an animation's frames carry their own): no
    frame's title runs into what is under it."""
    titles = [f.layout.title.text for f in fig.frames or () if f.layout and f.layout.title and f.layout.title.text]
    shown = fig.layout.title.text
    fig.layout.title.text = max([shown or "", *titles], key=line_count) or shown
    block = title_block_px(fig)
    fig.layout.title.text = shown
    return block


def presentation(fig: go.Figure, scale: float = 1.35, room_px: float = PROJECTOR_ROOM_PX) -> go.Figure:
    """A copy of `fig` for a projector: every type size `scale` times larger (title, subtitle, ticks,
    axis titles, legend, annotations, hovers, text on marks) and the room around it too: the title
    wrapped again at the larger size, a legend above the plot laid out again in the rows it now takes,
    the room between the title block, the legend and the plot and between stacked panels grown, the
    margins and the height grown to match, so the plot keeps its share of the chart. Laid out for a
    projector's chart (PROJECTOR_PX wide); where the chart would be taller than `room_px` (the first
    screen under the tabs and a slider), its plot gives up to 1 - SHRINK_FLOOR of its height, unless words
    are laid on its data (they keep the room they were drawn in). Rows a y axis
    names (the flow's GPUs) grow until their larger labels clear each other. Text on bars too small to
    hold it is hidden rather than run into its neighbours."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    fig = columns_joined(fig, _longest_title_block_px(fig))  # laid out for one width: in rows, that may fold
    out = go.Figure(fig)
    layout = out.layout
    old = fig.layout.margin
    old_top, old_bottom = old.t or BASE_TOP_PX, old.b or MARGIN["b"]
    old_plot = (fig.layout.height or 520) - old_top - old_bottom
    old_block = _longest_title_block_px(fig)  # what the layout kept room for: its longest frame title
    controls = controls_over_plot(fig, old_plot)  # Step through's play/pause and slider: moved under the plot
    band = max(controls.values(), default=0.0)
    above = _legend_above(fig)
    under = _legends_under(fig, old_plot)
    if above:  # the legend's place: from the title block to its top, and from its bottom to the plot
        legend, old_legend = fig.layout.legend, legend_px(fig)
        lifted = (legend.y - 1) * old_plot
        legend_top = old_top - lifted - (old_legend if legend.yanchor != "top" else 0)
        before, after = max(legend_top - old_block, 0), max(old_top - legend_top - old_legend, 0)
    font = layout.font.size or FONT_SIZE
    layout.font.size = _scaled(font, scale)
    title = layout.title
    title.font.size = _scaled(title.font.size or TITLE_SIZE, scale)
    title.pad.t = round((title.pad.t or TOP_PAD_PX) * scale)
    title.subtitle.font.size = _scaled(title.subtitle.font.size or SUBTITLE_SIZE, scale)
    if title.text:
        title.text = wrap(unwrap(title.text), title.font.size, PROJECTOR_PX)
    if title.subtitle.text:
        title.subtitle.text = wrap(unwrap(title.subtitle.text), title.subtitle.font.size, PROJECTOR_PX)
    for frame in out.frames or ():  # an animation's frames carry titles of their own
        if frame.layout and frame.layout.title and frame.layout.title.text:
            frame.layout.title.text = wrap(unwrap(frame.layout.title.text), title.font.size, PROJECTOR_PX)
    for name in [k for k in layout if re.match(r"legend\d*$", k)]:  # a figure's second legend grows alike
        layout[name].font.size = _scaled(layout[name].font.size or LEGEND_SIZE, scale)
    if layout.legend.title.font.size:
        layout.legend.title.font.size = _scaled(layout.legend.title.font.size, scale)
    if layout.legend.entrywidth and layout.legend.entrywidthmode != "fraction":
        layout.legend.entrywidth = round(layout.legend.entrywidth * scale)
    layout.hoverlabel.font.size = _scaled(layout.hoverlabel.font.size or FONT_SIZE - 1, scale)
    for annotation in layout.annotations:
        if annotation.name != CELL_NOTE:  # words in a box sized to hold them (One step's) keep their size
            annotation.font.size = _scaled(annotation.font.size or font, scale)
        for key in ("xshift", "yshift"):  # offsets in pixels from a panel: they hold text that grew
            if annotation[key]:
                annotation[key] = round(annotation[key] * scale)
    for axis in [getattr(layout, name) for name in layout if re.match(r"[xy]axis\d*$", name)]:
        if axis.tickfont.size:
            axis.tickfont.size = _scaled(axis.tickfont.size, scale)
        if axis.title.font.size:
            axis.title.font.size = _scaled(axis.title.font.size, scale)
    bar_text = []
    for trace in out.data:
        if trace.meta == CELL_TEXT:
            continue
        for key in _SIZED:
            if key in trace and trace[key].size is not None:
                trace[key].size = _scaled(trace[key].size, scale)
        if trace.type == "sankey" and trace.textfont.size is None:
            trace.textfont.size = _scaled(font, scale)
        # words inside a bar that may not hold them; words beside a bar (outside) run into nothing, and stay
        if trace.type == "bar" and (trace.text is not None or trace.texttemplate) and trace.textposition != "outside":
            sizes = [trace[k].size for k in ("textfont", "insidetextfont") if isinstance(trace[k].size, (int, float))]
            bar_text.append(min(sizes, default=_scaled(font, scale)))
    if bar_text:  # a label that does not fit its bar at the larger size is hidden, not run into the next
        layout.uniformtext = dict(mode="hide", minsize=min(bar_text))
    left, right = round((old.l or MARGIN["l"]) * scale), round((old.r or MARGIN["r"]) * scale)
    layout.margin = dict(l=left, r=right)
    plot_width = PROJECTOR_PX - left - right
    if layout.legend.title.text:  # a legend's title spans the plot at most
        layout.legend.title.text = wrap(unwrap(layout.legend.title.text), layout.legend.font.size, plot_width)
    _wrap_x_titles(out, plot_width, scale)
    # A bottom axis's title that takes more lines at the larger type pushes down what hangs under it
    grown_title = _bottom_title_growth_px(fig, out, scale)
    _hang_lower(out, grown_title)
    for annotation in layout.annotations:  # a note wrapped by wrap() is wrapped again at its larger size
        if annotation.text and SOFT_BREAK in annotation.text:
            room = plot_width - (annotation.xshift or 0) if annotation.xref == "paper" else plot_width
            annotation.text = wrap(unwrap(annotation.text), annotation.font.size, room)
    _wrap_legend_entries(out, plot_width)
    wrap_subplot_titles(out, left + right, PROJECTOR_PX)
    _thin_names(out, plot_width)
    block = _longest_title_block_px(out)
    old_over, over = over_plot_px(fig), over_plot_px(out)  # the top subplot's title, as wrapped before and now
    if above:
        new_legend = legend_px(out, PROJECTOR_PX)
        after = max(after - old_over, 0) * scale + over
        top = block + before * scale + new_legend + after
        legend_own = new_legend + max(before - GAP_PX, 0) * scale
        lifted = (top - block - before * scale) if layout.legend.yanchor == "top" else after
    else:  # what sits between the title block and the plot (step names, a subplot's title) grows with its type
        top = block + max(old_top - old_block - old_over - band, GAP_PX) * scale + over
    # A legend under the plot: its gap grown, and the margin its rows take as the projector's chart lays them out
    # (the plain margin kept rows for the narrowest chart); else the plain margin grown.
    bottom = _notes_below_px(out)
    for name, gap in under.items():
        bottom = max(bottom, gap * scale + grown_title + legend_px(out, PROJECTOR_PX, name=name))
    if not under:
        bottom = max(bottom, old_bottom * scale + grown_title)
    moved_controls = {}
    if controls:
        moved_controls, bottom = controls_under(out, controls, bottom, scale)
    # On the projector's first screen: the panels give up to a share of their height where the chart would run
    # past it, the room between them kept for their words; rows named on an axis then grow until they clear.
    rows = tick_room_px(out, 0) / max(old_plot, 1)  # the share of their height named rows need, at the larger type
    whole = _stretch_gaps(out, old_plot, scale, apply=False)
    gaps = _stretch_gaps(out, old_plot, scale, panel=0.0, apply=False)
    panels = max(whole - gaps, 1)
    words = _words_in_plot(out)
    floor = max(1.0 if words else SHRINK_FLOOR, rows)
    # Rows that need more room than their panel had grow the panels alone: grown after the layout, the whole plot
    # grew, and the room between stacked panels (already sized for their words) with it.
    grown = max(1.0, rows)
    panel = min(grown, max(floor, (room_px - top - bottom - gaps) / panels))
    moved_legend = None
    if top + gaps + panels * panel > room_px:  # the plot itself runs past the first screen: only it must fit there
        folded = max(BOXES_FOLD_FLOOR if _notes_in_boxes(out) else WORDS_FOLD_FLOOR if words else FOLD_FLOOR, rows)
        # a legend beside the plot stands by the plot at its least: its height where it gives up all it may
        top, bottom, right, moved_legend = _fold(out, top, bottom, room_px - gaps - panels * floor, above, left, right,
                                                 old_block=block, over=over, scale=scale, plot_px=gaps + panels * folded,
                                                 least_width=_sized_for_px(fig), legend_own=legend_own if above else 0.0)
        above = above and moved_legend is None and out.layout.legend.orientation == "h"  # not moved under or beside
        _thin_names(out, PROJECTOR_PX - left - right)  # a legend beside the plot leaves its columns less width
        # and its x axes' titles, wrapped to it (one centred under the plot ran under the legend): what hangs under
        # the plot moves down by the lines they gained
        _wrap_x_titles(out, PROJECTOR_PX - left - right, scale)
        more = _bottom_title_growth_px(fig, out, scale) - grown_title
        if more > 0:
            _hang_lower(out, more)
            grown_title, bottom = grown_title + more, bottom + more
            moved_legend = None if moved_legend is None else moved_legend + more
            moved_controls = {key: gap + more for key, gap in moved_controls.items()}
        lines_over = over_plot_px(out)  # and its panels' titles: wrapped to it, so none runs into the legend
        wrap_subplot_titles(out, left + right, PROJECTOR_PX)
        top += over_plot_px(out) - lines_over
        floor = folded
        panel = min(grown, max(floor, (room_px - top - gaps) / panels))
    plot_px = _stretch_gaps(out, old_plot, scale, panel)
    plot_px = tick_room_px(out, plot_px)  # rows named on the axis (the flow's GPUs) grow with their labels
    _wrap_y_titles(out, plot_px, scale)
    if _notes_in_boxes(out):  # boxes larger or smaller than the plain figure's: their words fitted to them again
        fit_box_notes(out, plot_px, PROJECTOR_PX - left - right)
    if above:
        layout.legend.y = 1 + lifted / max(plot_px, 1)
    if moved_legend is not None:
        layout.legend.y = -moved_legend / max(plot_px, 1)
    for name, gap in under.items():
        layout[name].y = -(gap * scale + grown_title) / max(plot_px, 1)
    for (kind, k), gap in moved_controls.items():
        layout[kind][k].y = -gap / max(plot_px, 1)
    layout.margin = dict(t=round(top), b=round(bottom), l=left, r=right)
    layout.height = round(top + plot_px + bottom)
    return out

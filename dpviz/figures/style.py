"""Names and looks shared by every view: "GPU 3", the simulated/real note, fonts for a projector.

The house look (`styled`) sets type sizes, the title block and margins, never a template, a
background or an ink colour of its own: on the page, st.plotly_chart's theme="streamlit" draws the
background, the text and the grid in the page's light or dark theme, and colours set here would fight
it (dark text on the dark theme). Text off the marks asks for the theme's own body text
(`colors.THEME_TEXT`), which Streamlit swaps in, rather than its faded grey (3.7:1 on white). What is
drawn on a mark sets its own colour (`colors.text_color_on`). The
offline report has no theme to follow, so it puts the light look on (`light`). `presentation` makes
a copy for a projector: larger type, the margins grown to match.
"""
from __future__ import annotations

import html
import math
import re
from typing import Any

import plotly.graph_objects as go

from dpviz.echo import plotly_text
from dpviz.trace import Trace
from dpviz.analysis.wording import plural  # noqa: F401  re-exported: the views' wording lives in one place
from dpviz.figures.colors import GUIDE, TEXT, THEME_TEXT, WHITE

FONT_SIZE = 16  # readable from the back of a classroom
TITLE_SIZE, SUBTITLE_SIZE, LEGEND_SIZE = FONT_SIZE + 4, FONT_SIZE - 2, FONT_SIZE - 2
# Set on the axes themselves: Streamlit's theme gives ticks and axis titles its own smaller sizes otherwise.
TICK_SIZE, AXIS_TITLE_SIZE = FONT_SIZE - 2, FONT_SIZE - 1
FONT_FAMILY = "Inter, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
NAME_LIMIT = 40  # characters of a name from a trace file (a device, an argument) in a label or a title

# Wrapping: plotly never wraps a title, so styled() breaks it where the narrowest chart would cut it.
# The page's chart is 468 px wide in an 800 px window (measured: the sidebar takes the rest); the house
# font averages 0.45 em a character in Chromium (Arial's metrics) and Inter 0.5, so 0.5 is safe.
NARROWEST_PX = 468
CHAR_EM = 0.5
TOP_PAD_PX = 18  # above the title: plotly sets a top-anchored title's first line a little high
LINE_EM = 1.3  # a line of the title block, in ems of its own font
GAP_PX = 14  # between the title block and what is under it (the legend, or the plot)
LEGEND_ROW_PX = 26  # a row of a horizontal legend at LEGEND_SIZE
MARGIN = dict(l=80, r=30, b=60)
BASE_TOP_PX = 100  # the top margin a one-line title and a one-line subtitle had, with no legend above the plot
SLACK = 1.1  # the estimate is on the safe side (Arial's 0.45 em): a line up to 10% over it still fits
SOFT_BREAK = "<br />"  # where styled() wrapped a line: presentation() can wrap again at a larger size
SEPARATOR = " · "
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def device_name(i: int) -> str:
    """How every view names device `i` of device_ids."""
    return f"GPU {i}"


def rows_text(first: int, rows: int) -> str:
    """'rows 12-15 (4 rows)': the slice of a batch starting at row `first`."""
    if rows == 0:
        return "no rows"
    span = f"row {first}" if rows == 1 else f"rows {first}-{first + rows - 1}"
    return f"{span} ({plural(rows, 'row')})"


def backend_note(trace: Trace) -> str:
    """Says once per figure whether the GPUs were real or simulated, or that the lanes are DDP's processes
    (HTML-escaped: plotly and the report read HTML)."""
    return trace.spec.part("note")(trace)


def gpu_note(trace: Trace) -> str:
    """'simulated GPUs: CPU threads stand in for 4 devices', or the real GPUs' model."""
    count = len(trace.lanes)
    if trace.simulated:
        return f"simulated GPUs: CPU threads stand in for {plural(count, 'device')}"
    model = trace.lanes[0].name.split(" ", 1)[-1] if trace.lanes else "CUDA"
    return f"real GPUs: {count} × {plotly_text(model, NAME_LIMIT)}"  # a trace file's own text


def check_batch(trace: Trace, batch: int) -> None:
    """Raise ValueError naming the batch and the valid range if `batch` is not in the trace."""
    count = len(trace.batches)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 0 <= batch < count:
        raise ValueError(f"batch must be between 0 and {count - 1}, got {batch!r}")


def visible_length(text: str) -> int:
    """Characters a reader sees in plotly's HTML: tags not counted, an entity (&lt;) one character."""
    return len(html.unescape(re.sub(r"<[^>]*>", "", text)))


def _chars_per_line(size: float, width_px: float = NARROWEST_PX) -> int:
    return max(12, int((width_px - 10) / (CHAR_EM * size)))


_NUMBER = re.compile(r"[\d][\d,.\-–]*$")
_MARKS = ((SEPARATOR.strip(), 3), (":", 2), (";", 2), (",", 1))  # a note's end, a clause's, a list item's


def _stops(line: str) -> list[tuple[int, int]]:
    """(index, visible characters before it) of every space outside a tag; an entity counts as one."""
    seen, inside, stops = 0, False, []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "<":
            inside = True
        elif ch == ">" and inside:
            inside = False
        elif not inside:
            if ch == " ":
                stops.append((i, seen))
            if ch == "&" and (m := re.match(r"&#?\w+;", line[i:])):
                i += len(m.group())
                seen += 1
                continue
            seen += 1
        i += 1
    return stops


def _bound(before: str, after: str) -> bool:
    """A space inside a phrase with a number in it ("10 of 16 GPUs", "batch 0 of 150", "GPUs 0-9"):
    the number stays with the words on either side of it."""
    if before.endswith(tuple(m for m, _ in _MARKS)):  # a clause's end is a break, number or not
        return False
    last, following = before.rsplit(" ", 1)[-1], after.split(" ", 1)[0]
    return bool(_NUMBER.match(last) or _NUMBER.match(following.rstrip(":;,")))


# A unit after a number ("1.75 MiB", "3.1 ms", "4 ×"): the two are never put on different lines.
_UNIT = re.compile(r"(B|KiB|MiB|GiB|TiB|ns|µs|ms|s|%|×)(?![\w])")


def _unit_split(before: str, after: str) -> bool:
    """A break between a number and its unit."""
    return bool(_NUMBER.match(before.rsplit(" ", 1)[-1]) and _UNIT.match(after))


def _short(text: str) -> bool:
    """A line of one or two short words, which reads as left over."""
    return len(text.split()) <= 2 and visible_length(text) <= 12


def _wrap_line(line: str, limit: int) -> list[str]:
    """One line (no breaks in it) cut into lines of at most `limit` visible characters, as few as can
    be; among as many, the cut that leaves no line of one or two short words, breaks no phrase with a
    number in it, ends lines at a note's or a clause's end (' · ', ': ', '; ', ', ') and fills the
    lines most evenly. A tag or an entity is never cut; a line a little over (SLACK) is left whole."""
    memo: dict[str, tuple[tuple, list[str]]] = {}

    def best(rest: str) -> tuple[tuple, list[str]]:
        if rest in memo:
            return memo[rest]
        if visible_length(rest) <= limit * SLACK:
            memo[rest] = ((1, int(_short(rest)), 0, 0, 0), [rest])
            return memo[rest]
        options = []
        for i, seen in _stops(rest):
            if seen > limit or i == 0:
                continue
            first, tail = rest[:i].rstrip(), rest[i + 1:].lstrip()
            if not first or not tail or _unit_split(first, tail):
                continue
            cost, lines = best(tail)
            mark = next((bonus for m, bonus in _MARKS if first.endswith(m)), 0)
            own = (1, int(_short(first)), int(_bound(first, tail)), -mark, (limit - seen) ** 2)
            options.append((tuple(a + b for a, b in zip(own, cost)), [first] + lines))
        memo[rest] = min(options, key=lambda o: o[0]) if options else ((1, 0, 0, 0, 0), [rest])
        return memo[rest]

    return best(line)[1]


def wrap(text: str, size: float, width_px: float = NARROWEST_PX) -> str:
    """`text` with SOFT_BREAKs where a chart `width_px` wide would cut a line of `size` px type; the
    breaks it already has are kept."""
    limit = _chars_per_line(size, width_px)
    lines = [_wrap_line(part, limit) for part in _BREAK.split(text)]
    hard = _BREAK.findall(text)
    return "".join(SOFT_BREAK.join(group) + (hard[k] if k < len(hard) else "") for k, group in enumerate(lines))


def unwrap(text: str) -> str:
    """`text` without the breaks wrap() added."""
    return text.replace(SOFT_BREAK, " ")


def line_count(text: str) -> int:
    return 0 if not text else 1 + len(_BREAK.findall(text))


def legend_entries(fig: go.Figure) -> list[str]:
    """The names the legend shows: traces in it (plotly leaves out heatmaps, sankeys and tables unless told)."""
    if fig.layout.showlegend is False:
        return []
    flags = [(t, t["showlegend"] if "showlegend" in t else False) for t in fig.data  # a sankey has no legend
             if ("legend" not in t or t["legend"] in (None, "legend"))]  # a second legend's are not this one's
    shown = [t.name or "" for t, flag in flags if flag is True
             or (flag is None and t.type not in ("heatmap", "table", "pie", "histogram2d"))]
    return shown if len(shown) > 1 or any(flag is True for _, flag in flags) else []


# Plotly's legend metrics (legend/draw.js): an entry is its swatch and gaps (40 px) and its text, 5 px
# apart; a row is the text's line (1.3 em, at least 16 px) and 3 px; grouped entries' rows have a 10 px
# gap more (tracegroupgap); the box adds about 10 px. Measured in Chromium at 14 and 18.9 px type.
ENTRY_GAP_PX, ITEM_GAP_PX, GROUP_GAP_PX, BOX_PX = 40, 5, 10, 10
# Arial's advance widths in ems, by kind of character (the house font falls back to it): capitals and
# digits are wider than CHAR_EM, so a legend of "GPU 10"s would take more room than 0.5 em a character.
_EM = {**dict.fromkeys("ijl.,:;'|!", 0.28), **dict.fromkeys("ft()[]/-r ", 0.34), **dict.fromkeys("mwMW%@", 0.86),
       **dict.fromkeys("ABCDEFGHIJKLNOPQRSTUVXYZ", 0.72), **dict.fromkeys("0123456789", 0.56)}


def text_px(text: str, size: float) -> float:
    """Width in pixels of `text` (plotly's HTML) at `size` px, in Arial's widths, a little on the wide side."""
    plain = html.unescape(re.sub(r"<[^>]*>", "", text))
    return sum(_EM.get(ch, 0.56) for ch in plain) * size


def _row_px(size: float) -> float:
    return max(1.3 * size, 16) + 3 + 3  # plotly's row and 3 px to spare


def legend_rows(names: list[str], width_px: float = NARROWEST_PX, size: float = LEGEND_SIZE, *,
                room: float | None = None, entry_px: float | None = None) -> int:
    """Rows plotly gives a horizontal legend of `names` over a plot `room` px wide (default: a chart
    `width_px` wide less styled()'s margins). Plotly puts them in one row if they fit, else in columns
    as wide as the widest entry (`entry_px`: the legend's entrywidth in pixels, when set)."""
    if not names:
        return 0
    room = width_px - MARGIN["l"] - MARGIN["r"] if room is None else room
    widths = [ENTRY_GAP_PX + (entry_px if entry_px else text_px(n, size)) for n in names]
    if sum(widths) + ITEM_GAP_PX * (len(widths) - 1) < room:
        return 1
    columns = max(1, int((room + ITEM_GAP_PX - 1) // (max(widths) + ITEM_GAP_PX)))
    return -(-len(names) // columns)


def _legend_groups(fig: go.Figure) -> list[list[str]] | None:
    """The legend's entries by legendgroup, in order, when plotly lays them out grouped; else None."""
    order = fig.layout.legend.traceorder or ""
    shown = set(legend_entries(fig))
    traces = [t for t in fig.data if (t.name or "") in shown and t.showlegend is not False]
    grouped = "grouped" in order or (not order and any(t.legendgroup for t in traces))
    if not grouped:
        return None
    groups: dict[str, list[str]] = {}
    for i, t in enumerate(traces):
        groups.setdefault(t.legendgroup or f"\0{i}", []).append(t.name or "")
    return list(groups.values())


def legend_px(fig: go.Figure, width_px: float = NARROWEST_PX, *, size: float | None = None,
              margins: tuple[float, float] | None = None) -> int:
    """Height in pixels of `fig`'s horizontal legend (its title, its rows, its box) on a chart `width_px`
    wide, laid out as plotly does: one row if it fits, else columns of the widest entry; a grouped
    legend packs its groups greedily, each group's entries one under another."""
    names = legend_entries(fig)
    if not names:
        return 0
    legend, margin = fig.layout.legend, fig.layout.margin
    size = size or legend.font.size or LEGEND_SIZE
    left, right = margins or (margin.l if margin.l is not None else MARGIN["l"], margin.r if margin.r is not None else MARGIN["r"])
    room = width_px - left - right
    entry = legend.entrywidth if legend.entrywidth and legend.entrywidthmode != "fraction" else None
    groups = _legend_groups(fig)
    if groups:
        gap = legend.tracegroupgap if legend.tracegroupgap is not None else GROUP_GAP_PX
        rows_px, used, tallest = 0.0, 0.0, 0.0
        for group in groups:
            step = ENTRY_GAP_PX + max(entry or text_px(n, size) for n in group) + ITEM_GAP_PX
            if used and used + step > room:
                rows_px, used, tallest = rows_px + tallest + gap, 0.0, 0.0
            used += step
            tallest = max(tallest, len(group) * _row_px(size))
        body = rows_px + tallest
    else:
        body = legend_rows(names, size=size, room=room, entry_px=entry) * _row_px(size)
    title = legend.title.text
    title_px = line_count(title) * 1.3 * (legend.title.font.size or size) + 16 if title else 0
    return math.ceil(body + title_px + BOX_PX)


def _legend_placed(fig: go.Figure) -> bool:
    legend = fig.layout.legend
    return any(v is not None for v in (legend.x, legend.y, legend.orientation))


def legend_under_plot(fig: go.Figure, names: list[str], under_px: float, legend: str = "legend") -> go.Figure:
    """After styled(): `legend` (its entries `names`) in rows under the plot, `under_px` below its bottom edge (past
    the bottom axis's labels), the bottom margin and the height grown by the rows it takes on the narrowest chart.
    Placed on the paper inside that margin, it makes plotly push no margin: the panels keep styled()'s size at every
    width, and presentation() grows the margin, the gap and the type together."""
    layout = fig.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    bottom = math.ceil(under_px + legend_rows(names) * LEGEND_ROW_PX + BOX_PX)
    placed = dict(orientation="h", x=0, xanchor="left", y=-under_px / plot_px, yanchor="top",
                  font=dict(size=LEGEND_SIZE, color=THEME_TEXT))
    return fig.update_layout({legend: placed}, margin_b=bottom, height=layout.height + bottom - layout.margin.b)


def title_block_px(fig: go.Figure) -> int:
    """Pixels from the figure's top to the end of its title and subtitle (both as wrapped)."""
    title = fig.layout.title
    size = (title.font.size or TITLE_SIZE)
    sub_size = (title.subtitle.font.size or SUBTITLE_SIZE)
    lines = line_count(title.text or "")
    sub_lines = line_count(title.subtitle.text or "")
    return (title.pad.t or TOP_PAD_PX) + math.ceil(lines * size * LINE_EM + sub_lines * sub_size * LINE_EM)


# A legend the view has not placed: in rows from the plot's left, between the subtitle and the plot.
TOP_LEGEND = dict(orientation="h", x=0, xanchor="left", xref="paper", y=1, yanchor="bottom", yref="paper")


def _subplot_titles(fig: go.Figure) -> list:
    """The annotations make_subplots puts over each subplot: centred, just above its domain."""
    return [a for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper" and a.showarrow is False
            and a.xanchor == "center" and a.yanchor == "bottom" and a.text]


def _wrap_subplot_titles(fig: go.Figure, margins_px: float = MARGIN["l"] + MARGIN["r"]) -> None:
    """Subplot titles cut to the width of their subplot at the narrowest chart."""
    plot_px = NARROWEST_PX - margins_px
    for annotation in _subplot_titles(fig):
        # The narrowest axis under the title is its own subplot's: a panel spanning both columns lies under a
        # left panel's title too (and plotly's layout keys come in no fixed order).
        under = [fig.layout[k] for k in fig.layout if re.match(r"xaxis\d*$", k)
                 and fig.layout[k].domain and fig.layout[k].domain[0] <= annotation.x <= fig.layout[k].domain[1]]
        axis = min(under, key=lambda a: a.domain[1] - a.domain[0], default=None)
        share = (axis.domain[1] - axis.domain[0]) if axis is not None else 1.0
        annotation.text = wrap(unwrap(annotation.text), annotation.font.size or FONT_SIZE, plot_px * share + 10)


def _over_plot_px(fig: go.Figure) -> int:
    """Room the top subplot's title takes above the plot area (0 without subplot titles)."""
    tops = [a for a in _subplot_titles(fig) if a.y >= 0.99]
    return max((math.ceil(line_count(a.text) * (a.font.size or FONT_SIZE) * LINE_EM) + 4 for a in tops), default=0)


def styled(fig: go.Figure, title: str, notes: list[str], height: int = 520) -> go.Figure:
    """Apply the house look; `notes` become the subtitle (the simulated note, what was aggregated).

    The title and the subtitle are wrapped to fit the narrowest chart, and the top margin (and the
    height, so the plot keeps its size) grows by the lines that adds. A legend the view has not placed
    goes in one or more rows between the subtitle and the plot, with room kept for its rows at the
    narrowest width, so it meets neither the title nor what is above the chart. One update_layout:
    plotly's updates cost milliseconds each (a view that makes its figure whole at once takes
    house_layout instead)."""
    if fig.layout.annotations:
        _wrap_subplot_titles(fig)
    over = _over_plot_px(fig) if fig.layout.annotations else 0
    on_top = bool(legend_entries(fig)) and not _legend_placed(fig)
    legend_room = legend_px(fig, size=LEGEND_SIZE, margins=(MARGIN["l"], MARGIN["r"])) if on_top else 0
    fig.update_layout(house_layout(title, notes, height, legend_on_top=on_top, legend_room=legend_room, over=over,
                                   axes=[k for k in fig.layout if re.match(r"[xy]axis\d+$", k)]))
    return fig


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`base` with `over` laid on it, nested dicts merged key by key, as update_layout merges them."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def house_layout(title: str, notes: list[str], height: int = 520, *, least_top: bool = True,
                 legend_on_top: bool = False, legend_room: int = 0, over: int = 0,
                 axes: list[str] = ()) -> dict[str, Any]:
    """styled()'s layout as a plain dict, for a view that makes its figure whole at once (a figure made
    with its layout costs less than one updated afterwards): `legend_on_top` for a legend to place above
    the plot, `legend_room` its rows' pixels, `over` what subplot titles take above the plot, `axes` the
    axes beyond the first two; with `least_top` off, the top margin is exactly the title's room, however
    short."""
    text = wrap(title, TITLE_SIZE)
    subtitle = wrap(SEPARATOR.join(n for n in notes if n), SUBTITLE_SIZE)
    ink = dict(size=LEGEND_SIZE, color=THEME_TEXT)
    legend = dict(TOP_LEGEND, font=ink) if legend_on_top else dict(font=ink)
    block = TOP_PAD_PX + math.ceil(line_count(text) * TITLE_SIZE * LINE_EM + line_count(subtitle) * SUBTITLE_SIZE * LINE_EM)
    top = block + GAP_PX + over + legend_room
    top = max(top, BASE_TOP_PX) if least_top else top
    total = height + top - BASE_TOP_PX
    if legend_on_top and over:  # over the top subplot's title, not on it
        legend["y"] = 1 + over / max(total - top - MARGIN["b"], 1)
    # Text off the marks in the theme's own ink (THEME_TEXT), not its faded grey: 4.5:1 on either page.
    axis = dict(tickfont=dict(size=TICK_SIZE, color=THEME_TEXT), title=dict(font=dict(size=AXIS_TITLE_SIZE, color=THEME_TEXT)))
    return dict(
        font=dict(family=FONT_FAMILY, size=FONT_SIZE, color=THEME_TEXT),
        title=dict(
            text=text, x=0.01, xanchor="left", xref="container", y=1, yanchor="top",
            yref="container", pad=dict(t=TOP_PAD_PX), font=dict(size=TITLE_SIZE, color=THEME_TEXT),
            subtitle=dict(text=subtitle, font=dict(size=SUBTITLE_SIZE, color=THEME_TEXT)),
        ),
        hoverlabel=dict(font_size=FONT_SIZE - 1), legend=legend, height=total, margin=dict(MARGIN, t=top),
        **{name: axis for name in ["xaxis", "yaxis", *axes]},
    )


def light(fig: go.Figure) -> go.Figure:
    """The light look on `fig` itself, for where no page theme applies (the offline HTML report): white
    background, dark ink, grey guides; what styled() leaves to the page's theme."""
    axis = dict(gridcolor="#E5E5E5", zerolinecolor="#D0D0D0", linecolor=GUIDE)
    fig.update_layout(template="none", paper_bgcolor=WHITE, plot_bgcolor=WHITE, font_color=TEXT,
                      hoverlabel=dict(bgcolor=WHITE, font_color=TEXT))
    fig.update_xaxes(**axis)
    fig.update_yaxes(**axis)
    # The theme's ink (THEME_TEXT) has no Streamlit to swap it in: the light look's dark text instead.
    layout = fig.layout
    legends = [layout[k] for k in layout if re.match(r"legend\d*$", k)]  # a second legend's too
    for font in (layout.title.font, layout.title.subtitle.font, *(g.font for g in legends), layout.legend.title.font,
                 *(a.font for a in layout.annotations)):
        if font.color == THEME_TEXT:
            font.color = TEXT
    for axis_name in [k for k in layout if re.match(r"[xy]axis\d*$", k)]:
        for font in (layout[axis_name].tickfont, layout[axis_name].title.font):
            if font.color == THEME_TEXT:
                font.color = TEXT
    return fig


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


def _legend_above(fig: go.Figure) -> bool:
    legend = fig.layout.legend
    return (legend.orientation == "h" and legend.y is not None and legend.y >= 1 and legend.yref in (None, "paper")
            and bool(legend_entries(fig)))


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
    titles = [a for a in _subplot_titles(fig) if abs(a.y - lower[1]) < 1e-6]
    return px + max((line_count(a.text) * (a.font.size or FONT_SIZE) * LINE_EM for a in titles), default=0) + 8


def _stretch_gaps(fig: go.Figure, plot_px: float, scale: float) -> float:
    """Grow the room between stacked panels by `scale` (their axis labels and headings grow with the
    type), each panel keeping its height in pixels; what is placed on the paper moves with its panel.
    Returns the plot area's new height."""
    names = [k for k in fig.layout if re.match(r"yaxis\d*$", k) and fig.layout[k].domain]
    spans = sorted({tuple(fig.layout[k].domain) for k in names})
    if len(spans) < 2:
        return plot_px
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
        new_px += (b - a) * plot_px
        previous = b
    new_px += (1 - previous) * plot_px * scale

    def moved(y):
        if not isinstance(y, (int, float)) or isinstance(y, bool):
            return y
        edge, at = 0.0, 0.0
        for (a, b), start, factor in zip(merged, starts, grow):
            if y < a:
                return (at + (y - edge) * plot_px * factor) / new_px
            if y <= b:
                return (start + (y - a) * plot_px) / new_px
            edge, at = b, start + (b - a) * plot_px
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


def tick_room_px(fig: go.Figure, plot_px: float) -> float:
    """The plot area's height in pixels at which no two neighbouring labels of a y axis with labels of
    its own (tickvals and ticktext, lines as written) overlap: `plot_px` if they already fit."""
    need = plot_px
    for name in [k for k in fig.layout if re.match(r"yaxis\d*$", k)]:
        axis = fig.layout[name]
        if axis.tickvals is None or axis.ticktext is None or axis.range is None:
            continue
        ticks = sorted(zip((float(v) for v in axis.tickvals), axis.ticktext))
        span = abs(float(axis.range[1]) - float(axis.range[0]))
        share = (axis.domain[1] - axis.domain[0]) if axis.domain else 1.0
        size = axis.tickfont.size or TICK_SIZE
        for (a, first), (b, second) in zip(ticks, ticks[1:]):
            if b - a <= 0 or span <= 0:
                continue
            px = (line_count(first) + line_count(second)) / 2 * size * LINE_EM + TICK_GAP_PX
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


def _notes_below_px(fig: go.Figure) -> float:
    """The bottom margin a note under the plot (an annotation hung from the paper's bottom) needs."""
    need = 0.0
    for a in fig.layout.annotations:
        if a.yref == "paper" and a.y is not None and a.y <= 0 and a.yanchor == "top" and a.text:
            need = max(need, -(a.yshift or 0) + line_count(a.text) * (a.font.size or FONT_SIZE) * LINE_EM + 12)
    return need


def presentation(fig: go.Figure, scale: float = 1.35) -> go.Figure:
    """A copy of `fig` for a projector: every type size `scale` times larger (title, subtitle, ticks,
    axis titles, legend, annotations, hovers, text on marks) and the room around it too: the title
    wrapped again at the larger size, a legend above the plot laid out again in the rows it now takes,
    the room between the title block, the legend and the plot and between stacked panels grown, the
    margins and the height grown to match, so the plot keeps its share of the chart. Rows a y axis
    names (the flow's GPUs) grow until their larger labels clear each other. Text on bars too small to
    hold it is hidden rather than run into its neighbours."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    out = go.Figure(fig)
    layout = out.layout
    old = fig.layout.margin
    old_top, old_bottom = old.t or BASE_TOP_PX, old.b or MARGIN["b"]
    old_plot = (fig.layout.height or 520) - old_top - old_bottom
    old_block = title_block_px(fig)
    above = _legend_above(fig)
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
        title.text = wrap(unwrap(title.text), title.font.size)
    if title.subtitle.text:
        title.subtitle.text = wrap(unwrap(title.subtitle.text), title.subtitle.font.size)
    for frame in out.frames or ():  # an animation's frames carry titles of their own
        if frame.layout and frame.layout.title and frame.layout.title.text:
            frame.layout.title.text = wrap(unwrap(frame.layout.title.text), title.font.size)
    for name in [k for k in layout if re.match(r"legend\d*$", k)]:  # a figure's second legend grows alike
        layout[name].font.size = _scaled(layout[name].font.size or LEGEND_SIZE, scale)
    if layout.legend.title.font.size:
        layout.legend.title.font.size = _scaled(layout.legend.title.font.size, scale)
    if layout.legend.entrywidth and layout.legend.entrywidthmode != "fraction":
        layout.legend.entrywidth = round(layout.legend.entrywidth * scale)
    layout.hoverlabel.font.size = _scaled(layout.hoverlabel.font.size or FONT_SIZE - 1, scale)
    for annotation in layout.annotations:
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
        if trace.type == "bar" and (trace.text is not None or trace.texttemplate):
            sizes = [trace[k].size for k in ("textfont", "insidetextfont") if isinstance(trace[k].size, (int, float))]
            bar_text.append(min(sizes, default=_scaled(font, scale)))
    if bar_text:  # a label that does not fit its bar at the larger size is hidden, not run into the next
        layout.uniformtext = dict(mode="hide", minsize=min(bar_text))
    left, right = round((old.l or MARGIN["l"]) * scale), round((old.r or MARGIN["r"]) * scale)
    layout.margin = dict(l=left, r=right)
    plot_width = NARROWEST_PX - left - right
    if layout.legend.title.text:  # a legend's title spans the plot at most
        layout.legend.title.text = wrap(unwrap(layout.legend.title.text), layout.legend.font.size, plot_width)
    for axis in [getattr(layout, name) for name in layout if re.match(r"xaxis\d*$", name)]:
        if axis.title.text:
            axis.title.text = wrap(unwrap(axis.title.text), axis.title.font.size or _scaled(AXIS_TITLE_SIZE, scale), plot_width)
    for annotation in layout.annotations:  # a note wrapped by wrap() is wrapped again at its larger size
        if annotation.text and SOFT_BREAK in annotation.text:
            room = plot_width - (annotation.xshift or 0) if annotation.xref == "paper" else plot_width
            annotation.text = wrap(unwrap(annotation.text), annotation.font.size, room)
    _wrap_subplot_titles(out, left + right)
    _thin_names(out, plot_width)
    plot_px = _stretch_gaps(out, old_plot, scale)
    plot_px = tick_room_px(out, plot_px)  # rows named on the axis (the flow's GPUs) grow with their labels
    block = title_block_px(out)
    if above:
        new_legend = legend_px(out)
        after = max(after * scale, _over_plot_px(out))  # the top subplot's title, as wrapped again
        top = block + before * scale + new_legend + after
        lifted = (top - block - before * scale) if layout.legend.yanchor == "top" else after
        layout.legend.y = 1 + lifted / max(plot_px, 1)
    else:  # what sits between the title block and the plot (a subplot's title, step names) grows with its type
        top = block + max(old_top - old_block, GAP_PX) * scale
    bottom = max(old_bottom * scale, _notes_below_px(out))
    layout.margin = dict(t=round(top), b=round(bottom), l=left, r=right)
    layout.height = round(top + plot_px + bottom)
    return out


DETAILS = "details"  # the key in a figure's layout.meta of what its notes leave out


def chart_details(fig: go.Figure) -> str | None:
    """What a figure's notes leave out, as markdown for an expander under the chart (dpviz's own sentences and
    figures, never text from a trace); None when it has none."""
    meta = fig.layout.meta
    text = meta.get(DETAILS) if isinstance(meta, dict) else None
    return text or None


def plain_label(label: str) -> str:
    """A phase's label without the timeline's hatch hint: 'backward (×)' -> 'backward'."""
    return re.sub(r"\s*\([^\w\s]\)$", "", label)

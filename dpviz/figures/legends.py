"""Legends as plotly lays them out: the entries a figure's legend shows, the rows and pixels a
horizontal legend takes at a chart's width, and a legend placed above or under the plot.

styled() (dpviz.figures.layout) keeps room for a legend with these; presentation() lays one out again
at its larger type; a view that places its own legend under the plot calls `legend_under_plot`.
"""
from __future__ import annotations

import math
import re

import plotly.graph_objects as go

from dpviz.figures.colors import THEME_TEXT
from dpviz.figures.sizes import GAP_PX, LEGEND_ROW_PX, LEGEND_SIZE, MARGIN, NARROWEST_PX
from dpviz.figures.text_fit import line_count, unwrap, widest_line_px

# A legend the view has not placed: in rows from the plot's left, between the subtitle and the plot.
TOP_LEGEND = dict(orientation="h", x=0, xanchor="left", xref="paper", y=1, yanchor="bottom", yref="paper")


def legend_entries(fig: go.Figure, legend: str = "legend") -> list[str]:
    """The names a legend shows (the figure's first, or `legend`: "legend2"): traces in it (plotly leaves out
    heatmaps, sankeys and tables unless told)."""
    if fig.layout.showlegend is False:
        return []
    mine = (None, "legend") if legend == "legend" else (legend,)
    flags = [(t, t["showlegend"] if "showlegend" in t else False) for t in fig.data  # a sankey has no legend
             if ("legend" not in t and legend == "legend") or ("legend" in t and t["legend"] in mine)]
    shown = [t.name or "" for t, flag in flags if flag is True
             or (flag is None and t.type not in ("heatmap", "table", "pie", "histogram2d"))]
    return shown if len(shown) > 1 or any(flag is True for _, flag in flags) else []


# Plotly's legend metrics (legend/draw.js): an entry is its swatch and gaps (40 px) and its text, 5 px
# apart; a row is the text's line (1.3 em, at least 16 px) and 3 px; grouped entries' rows have a 10 px
# gap more (tracegroupgap); the box adds about 10 px. Measured in Chromium at 14 and 18.9 px type.
ENTRY_GAP_PX, ITEM_GAP_PX, GROUP_GAP_PX, BOX_PX = 40, 5, 10, 10


def _row_px(size: float, lines: int = 1) -> float:
    return max(1.3 * size * lines, 16) + 3 + 3  # plotly's row (an entry of several lines: each 1.3 em) and 3 px to spare


def legend_rows(names: list[str], width_px: float = NARROWEST_PX, size: float = LEGEND_SIZE, *,
                room: float | None = None, entry_px: float | None = None) -> int:
    """Rows plotly gives a horizontal legend of `names` over a plot `room` px wide (default: a chart
    `width_px` wide less styled()'s margins). Plotly puts them in one row if they fit, else in columns
    as wide as the widest entry (`entry_px`: the legend's entrywidth in pixels, when set)."""
    if not names:
        return 0
    room = width_px - MARGIN["l"] - MARGIN["r"] if room is None else room
    widths = [ENTRY_GAP_PX + (entry_px if entry_px else widest_line_px(n, size)) for n in names]
    if sum(widths) + ITEM_GAP_PX * (len(widths) - 1) < room:
        return 1
    columns = max(1, int((room + ITEM_GAP_PX - 1) // (max(widths) + ITEM_GAP_PX)))
    return -(-len(names) // columns)


def _legend_groups(fig: go.Figure, legend: str = "legend") -> list[list[str]] | None:
    """The legend's entries by legendgroup, in order, when plotly lays them out grouped; else None."""
    order = fig.layout[legend].traceorder or ""
    shown = set(legend_entries(fig, legend))
    traces = [t for t in fig.data if (t.name or "") in shown and t.showlegend is not False]
    grouped = "grouped" in order or (not order and any(t.legendgroup for t in traces))
    if not grouped:
        return None
    groups: dict[str, list[str]] = {}
    for i, t in enumerate(traces):
        groups.setdefault(t.legendgroup or f"\0{i}", []).append(t.name or "")
    return list(groups.values())


def group_gaps_px(fig: go.Figure, legend: str = "legend") -> float:
    """Pixels the gaps between a grouped legend's groups add when its entries stand one under another (a legend
    beside the plot): 0 for a legend plotly does not group."""
    groups = _legend_groups(fig, legend)
    if not groups:
        return 0.0
    gap = fig.layout[legend].tracegroupgap
    return (len(groups) - 1) * (gap if gap is not None else GROUP_GAP_PX)


def legend_px(fig: go.Figure, width_px: float = NARROWEST_PX, *, size: float | None = None,
              margins: tuple[float, float] | None = None, name: str = "legend") -> int:
    """Height in pixels of `fig`'s horizontal legend (its first, or the one called `name`: its title, its rows,
    its box) on a chart `width_px` wide, laid out as plotly does: one row if it fits, else columns of the widest
    entry; a grouped legend packs its groups greedily, each group's entries one under another."""
    names = legend_entries(fig, name)
    if not names:
        return 0
    legend, margin = fig.layout[name], fig.layout.margin
    size = size or legend.font.size or LEGEND_SIZE
    left, right = margins or (margin.l if margin.l is not None else MARGIN["l"], margin.r if margin.r is not None else MARGIN["r"])
    room = width_px - left - right
    entry = legend.entrywidth if legend.entrywidth and legend.entrywidthmode != "fraction" else None
    groups = _legend_groups(fig, name)
    if groups:
        gap = legend.tracegroupgap if legend.tracegroupgap is not None else GROUP_GAP_PX
        rows_px, used, tallest = 0.0, 0.0, 0.0
        for group in groups:
            step = ENTRY_GAP_PX + max(entry or widest_line_px(n, size) for n in group) + ITEM_GAP_PX
            if used and used + step > room:
                rows_px, used, tallest = rows_px + tallest + gap, 0.0, 0.0
            used += step
            tallest = max(tallest, sum(_row_px(size, max(1, line_count(n))) for n in group))
        body = rows_px + tallest
    else:
        rows = legend_rows(names, size=size, room=room, entry_px=entry)
        columns = -(-len(names) // rows)  # plotly fills each row from the left: a row is as tall as its tallest entry
        body = sum(_row_px(size, max(max(1, line_count(n)) for n in names[r * columns:(r + 1) * columns]))
                   for r in range(rows))
    title = legend.title.text
    title_px = line_count(title) * 1.3 * (legend.title.font.size or size) + 16 if title else 0
    return math.ceil(body + title_px + BOX_PX)


def column_px(entries: int, size: float = LEGEND_SIZE, title: str | None = None) -> int:
    """Height in pixels of a vertical legend of `entries` under `title`, as plotly lays it out: each entry a line
    (1.3 em, at least 16 px) and 3 px, the title's lines 1.3 em each, the box about 10 px (measured in Chromium)."""
    title_px = line_count(title) * 1.3 * size if title else 0
    return math.ceil(title_px + entries * (max(1.3 * size, 16) + 3) + BOX_PX)


def legend_columns(fig: go.Figure) -> list[str]:
    """The legends laid side by side over the plot, each a vertical column (Memory's kinds of tensor: as many rows
    at every width), the first legend among them; none when fewer than two."""
    names = sorted((k for k in fig.layout if re.match(r"legend\d*$", k)), key=lambda k: int(k[6:] or 1))
    columns = [k for k in names if fig.layout[k].orientation == "v" and fig.layout[k].y is not None
               and fig.layout[k].y >= 1 and fig.layout[k].yanchor == "bottom" and legend_entries(fig, k)]
    return columns if len(columns) > 1 and "legend" in columns else []


def columns_joined(fig: go.Figure, block_px: float) -> go.Figure:
    """`fig` with its legend columns made one legend in rows over the plot, as styled() places one: what a chart laid
    out for one known width (a projector's) shows, and may fold beside or under the plot. The room over the plot is
    the title block's (`block_px`), the gap and that legend's rows on the narrowest chart; the plot keeps its height."""
    columns = legend_columns(fig)
    if not columns:
        return fig
    whole = fig.to_dict()  # as plain data: plotly's objects kept a legend set to None in their JSON
    for trace in whole["data"]:
        if trace.get("legend") in columns:
            del trace["legend"]
    layout = whole["layout"]
    for name in columns[1:]:
        del layout[name]
    legend = layout["legend"]
    legend.update(TOP_LEGEND)
    if legend.get("title", {}).get("text"):
        legend["title"]["text"] = unwrap(legend["title"]["text"])
    out = go.Figure(whole)
    top = math.ceil(block_px + GAP_PX + legend_px(out))
    return out.update_layout(margin_t=top, height=(layout.get("height") or 520) + top - (layout["margin"].get("t") or 0))


def legend_placed(fig: go.Figure) -> bool:
    """Whether the view placed its legend itself (styled() places one it has not)."""
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

"""One step, drawn the same way for every engine: a row per device, a column per part of the step.

Each device has a box per column, saying what it holds or does there; what moves between devices runs in the
column's left strip: a bar in the colour of the move's kind (the one legend of dpviz.trace.legend, as every view
of every engine draws it) with an arrow to or from each device that takes part. An arrow into the bar is what a device sends, an arrow into a box what it
receives, a two-headed one a collective (it hands its bytes in and gets a result back). A pipeline's sends go
from one stage to the next, so they are drawn between neighbouring rows instead. The bytes sit where each arrow
ends, in the box, after the move's swatch (a chart 440 pixels wide has no room beside the arrows for them; the
hover gives every digit, and whether the device sent or received them).

Pure: an engine's reader fills dpviz.analysis.one_step.OneStep from a trace; this draws it.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go

from dpviz.analysis.one_step import ALL, BACK, COLUMNS, HUB, NEXT, Arrow, OneStep, short_bytes
from dpviz.analysis.wording import human_bytes
from dpviz.figures.colors import GUIDE, THEME_BACKGROUND, THEME_TEXT, device_color, with_alpha
from dpviz.figures.layout import house_layout, merged
from dpviz.figures.presenting_boxes import CELL_LINES, CELL_NOTE, SIDE_PX, box_key, fitted, plain
from dpviz.figures.sizes import GAP_PX, LINE_EM, NARROWEST_PX
from dpviz.figures.text_fit import text_px
from dpviz.trace.legend import kind_color

BOX_LEFT, BOX_RIGHT, BOX_HALF = 0.23, 0.99, 0.42  # a box, in its column (0 to 1) and its row (centre ± half)
BAR_X = (0.03, 0.12)  # the first move's bar, the second's
CELL_SIZE, HEAD_SIZE = 12, 14  # a box's words, a column's heading: 12 px, the least a projector's room reads
LINE_PX = CELL_SIZE * LINE_EM  # a line of a box
BOX_PAD_PX, LEAST_PAD_PX = 8, 4  # a box's room above and below its lines; the least, in a lane shrunk to fit
# The chart's height on a projector's first screen: 768 px less the ~200 the page's heading, the box above the
# tabs, the tabs and the slider take. Its lanes shrink to fit it, each box keeping the lines it has room for.
FIRST_SCREEN_CHART_PX = 560
LEAST_ROW_PX = 24  # a lane's name at the ticks' size, one line of a box
WHOLE_LANES = 4  # up to this many lanes every box keeps all its lines (a chart a few pixels past the first screen)
FAILED = "#CC3311"  # the edge of the box a step failed in (the failure colour of the other views)
STEM_PX = 2  # an arrow's line width
STANDOFF_PX = 3  # between an arrow's ends and what it points at
HALO_PX = 3  # the page's background each side of an arrow, where it crosses another move's bar
NOTHING_MOVES = "nothing moves"


def _offsets(moves: int) -> tuple[float, ...]:
    """Where each move's arrows cross a row, from its centre: two moves share the row, one above the other."""
    return (0.0,) if moves < 2 else (-0.2, 0.2)


def _bytes_lines(picture: OneStep, lane: int, key: str) -> list[str]:
    """A line per move of the column this lane takes part in: the move's swatch, in, out or ↔, and the bytes."""
    lines = []
    for move in picture.moves_in(key):
        sent, received = move.sent.get(lane, 0), move.received.get(lane, 0)
        if lane not in move.sent and lane not in move.received:
            continue
        # Which way is the arrow's to say (its heads); the box gives the size it carried for this device: what it
        # handed the move, as the collectives' figures count it. A lane that both sends and receives in a move some
        # lanes only receive from (ZeRO-1's broadcasts, an owner of a shard) counts both, or a receiver's figure
        # reads as more than what the owners sent; the hover splits it.
        handed = sent + received if move.shape == HUB and sent and received else sent or received
        lines.append(f"<span style='color:{kind_color(move.kind)}'>■</span> {short_bytes(handed)}")
    return lines


def one_step_figure(picture: OneStep) -> go.Figure:
    """The figure of `picture`, each move in its kind's colour."""
    lanes = list(picture.lane_ids)
    row = {lane: i for i, lane in enumerate(lanes)}
    shapes, notes_on, hover_x, hover_y, hover_text = [], [], [], [], []
    written = {(lane, key): list(picture.cells[(lane, key)].lines) + _bytes_lines(picture, lane, key)
               for key, _ in COLUMNS for lane in lanes}
    briefs = {(lane, key): list(picture.cells[(lane, key)].brief or picture.cells[(lane, key)].lines)
              + _bytes_lines(picture, lane, key) for key, _ in COLUMNS for lane in lanes}
    most_lines = max((len(lines) for lines in written.values()), default=1)
    heading_texts = _headings(picture)
    head_lines = heading_texts[0].count("<br>") + 1
    over = math.ceil(head_lines * HEAD_SIZE * LINE_EM) + GAP_PX
    # The house look as a plain dict, the figure made with it in one go: plotly validates a figure's hundred
    # annotations once, not again for each update (a new run draws this first).
    layout = house_layout(picture.title, list(picture.notes), least_top=False, over=over)
    top, bottom = layout["margin"]["t"], 24
    row_px = lane_px(len(lanes), most_lines, top + bottom)
    room = box_lines(row_px)
    kept: dict[str, list[list[str]]] = {}  # every box's whole and brief lines: presentation() fits them to its boxes
    for c, (key, _) in enumerate(COLUMNS):
        for lane in lanes:
            cell = picture.cells[(lane, key)]
            y = row[lane]
            failed = (picture.failed == key and not cell.idle
                      and (picture.failed_lanes is None or lane in picture.failed_lanes))
            # The fill says whose box it is; the edge only bounds it (the rows are named on the left).
            shapes.append(dict(
                type="rect", x0=c + BOX_LEFT, x1=c + BOX_RIGHT, y0=y - BOX_HALF, y1=y + BOX_HALF, layer="below",
                fillcolor="rgba(0,0,0,0)" if cell.idle else with_alpha(device_color(lane), 0.22),
                line=dict(color=FAILED if failed else GUIDE if cell.idle else device_color(lane),
                          width=3 if failed else 1, dash="dot" if cell.idle else "solid"),
                name="box"))
            lines = written[(lane, key)]
            shown, complete = fitted(lines, briefs[(lane, key)], room, BOX_TEXT_PX, CELL_SIZE)
            x = c + (BOX_LEFT + BOX_RIGHT) / 2
            kept[box_key(x, y)] = [lines, briefs[(lane, key)]]
            notes_on.append(dict(x=x, y=y, text="<br>".join(shown), showarrow=False,
                                 font=dict(size=CELL_SIZE, color=THEME_TEXT), name=CELL_NOTE))
            hover = cell.hover or ("<br>".join(plain(line) for line in lines) if not complete else "")
            if hover:
                hover_x.append(c + (BOX_LEFT + BOX_RIGHT) / 2)
                hover_y.append(y)
                hover_text.append(hover)
        moves = picture.moves_in(key)
        for move, bar, offset in zip(moves, BAR_X, _offsets(len(moves))):
            drawn = _arrows(move, c + bar, c + BOX_LEFT, offset, row, kind_color(move.kind))
            shapes += drawn[0]
            notes_on += drawn[1]
            for lane in move.lanes:
                if lane in row:
                    hover_x.append(c + (bar + BOX_LEFT) / 2)
                    hover_y.append(row[lane] + offset)
                    hover_text.append(f"{move.hover or move.name}: {_hover_bytes(move, lane)}")
    headings = [dict(x=c + (BOX_LEFT + BOX_RIGHT) / 2, y=1, xref="x", yref="paper", yanchor="bottom", yshift=GAP_PX // 2,
                     text=text, showarrow=False, name="column", font=dict(size=HEAD_SIZE, color=THEME_TEXT))
                for c, text in enumerate(heading_texts)]
    layout = merged(layout, dict(
        shapes=shapes, annotations=notes_on + headings, hovermode="closest",
        margin=dict(t=top, b=bottom, l=MARGIN_LEFT_PX, r=8), height=top + row_px * len(lanes) + bottom,
        meta={CELL_LINES: kept},
        xaxis=dict(range=[0, len(COLUMNS)], visible=False, fixedrange=True),
        yaxis=dict(range=[len(lanes) - 0.5, -0.5], tickvals=list(range(len(lanes))), ticktext=list(picture.lanes),
                   showgrid=False, zeroline=False, fixedrange=True, ticks=""),
    ))
    hovers = go.Scatter(x=hover_x, y=hover_y, mode="markers", marker=dict(size=18, opacity=0), hovertext=hover_text,
                        hovertemplate="%{hovertext}<extra></extra>", showlegend=False)
    # Not validated again: its keys are plotly's own, written out in full (no "font_size" shorthand), and its values
    # plain numbers and strings, so validating changes nothing (tests/test_figures_one_step.py holds it to the
    # validated figure) and cost most of the figure's time, which a new run waits for.
    return go.Figure(hovers, layout=layout, _validate=False)


MARGIN_LEFT_PX = 64  # the lanes' names: "stage 16" at the ticks' size
# A box's line on the narrowest chart: the width its words may take
BOX_TEXT_PX = (NARROWEST_PX - MARGIN_LEFT_PX - 8) / len(COLUMNS) * (BOX_RIGHT - BOX_LEFT) - 2 * SIDE_PX


def lane_px(lanes: int, most_lines: int, margins_px: int) -> int:
    """A lane's height: as tall as the fullest box's lines need (its box 2 × BOX_HALF of it), but no taller than
    lets every lane onto a projector's first screen (FIRST_SCREEN_CHART_PX with `margins_px` above and below the
    plot) past WHOLE_LANES lanes, and never under LEAST_ROW_PX."""
    needed = max(48, math.ceil((most_lines * LINE_PX + BOX_PAD_PX) / (2 * BOX_HALF)))
    if lanes <= WHOLE_LANES:
        return needed
    fits = (FIRST_SCREEN_CHART_PX - margins_px) // lanes
    return max(LEAST_ROW_PX, min(needed, fits))


def box_lines(row_px: int) -> int:
    """How many lines of a box a lane `row_px` tall holds, at least one."""
    return max(1, int((row_px * 2 * BOX_HALF - LEAST_PAD_PX) // LINE_PX))


def _hover_bytes(move: Arrow, lane: int) -> str:
    sent, received = move.sent.get(lane, 0), move.received.get(lane, 0)
    if move.shape == ALL:
        return f"hands in {human_bytes(sent or received)}"
    return ", ".join(part for part in (f"sends {human_bytes(sent)}" if sent else "",
                                       f"receives {human_bytes(received)}" if received else "") if part)


# A column's width on the narrowest chart, less room between two headings: a move's name wider than this breaks.
COLUMN_PX = (NARROWEST_PX - MARGIN_LEFT_PX - 8) / len(COLUMNS) - 8


def _move_lines(name: str, color: str) -> list[str]:
    """A move's line under its column's name, after its kind's swatch; broken after its last hyphen or space where
    the narrowest chart's column cannot hold it ('reduce-' over 'scatter', 'output' over 'grads'), which ran into the
    next column's name."""
    swatch = f"<span style='color:{color}'>■</span>"
    cut = max(name.rfind("-"), name.rfind(" "))
    if text_px(f"■ {name}", HEAD_SIZE) <= COLUMN_PX or cut <= 0:
        return [f"{swatch} {name}"]
    return [f"{swatch} {name[:cut + 1].rstrip()}", name[cut + 1:]]


def _heading_lines(title: str, picture: OneStep, key: str) -> list[str]:
    """The column's name, and under it a line per move in its kind's swatch: what moves there ('nothing moves' where
    nothing does, so that a column reads the same in every engine)."""
    lines = [f"<b>{title}</b>"]
    for move in picture.moves_in(key):
        lines += _move_lines(move.name, kind_color(move.kind))
    return lines if len(lines) > 1 else lines + [NOTHING_MOVES]


def _headings(picture: OneStep) -> list[str]:
    """Every column's heading, each as many lines as the fullest, its name on the first: the names in one row."""
    written = [_heading_lines(title, picture, key) for key, title in COLUMNS]
    most = max(len(lines) for lines in written)
    return ["<br>".join(lines + [" "] * (most - len(lines))) for lines in written]


def _arrows(move: Arrow, bar: float, box: float, offset: float, row: dict[int, int], color: str):
    """The shapes and annotations of one move: its bar and an arrow per lane (HUB, ALL), or an arrow from each
    lane to its neighbour (NEXT, BACK). The bar runs whole from its first lane to its last: another move's arrows
    cross over it (annotations lie above shapes), and a bar cut where each crossed read as broken stubs."""
    shapes, notes = [], []
    lanes = [lane for lane in move.lanes if lane in row]
    if move.shape in (NEXT, BACK):
        for lane in lanes:
            to = lane + (1 if move.shape == NEXT else -1)
            if move.sent.get(lane, 0) <= 0 or to not in row:
                continue
            y0, y1 = row[lane], row[to]
            step = 1 if y1 > y0 else -1
            tail, head = y0 + step * (BOX_HALF - 0.1), y1 - step * (BOX_HALF - 0.1)
            notes.append(_arrow(bar + 0.02, tail, bar + 0.02, head, color, "end"))
        return shapes, notes
    ys = [row[lane] + offset for lane in lanes]
    if len(ys) > 1:
        shapes.append(dict(type="line", x0=bar, x1=bar, y0=min(ys), y1=max(ys), line=dict(color=color, width=STEM_PX),
                           name="bar"))
    for lane, y in zip(lanes, ys):
        sent, received = move.sent.get(lane, 0), move.received.get(lane, 0)
        notes.append(_halo(bar, y, box, y))
        both = move.shape == ALL or (sent and received)
        if both:
            notes.append(_arrow(bar, y, box, y, color, "end+start"))
        elif sent:
            notes.append(_arrow(box, y, bar, y, color, "end"))
        else:
            notes.append(_arrow(bar, y, box, y, color, "end"))
    return shapes, notes


def _halo(x0: float, y0: float, x1: float, y1: float) -> dict:
    """A stroke in the page's background under an arrow from its bar (x0) to its box (x1): where the arrow crosses
    another move's bar it runs through a gap of its own, not along a colour it may not contrast with (the copy's
    brown over the gather's violet, 1.5:1). It starts just clear of the arrow's own bar (a stem's half-width past the
    arrow's own start), which stays whole."""
    return dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True,
                arrowhead=0, arrowwidth=STEM_PX + 2 * HALO_PX, arrowcolor=THEME_BACKGROUND,
                standoff=STANDOFF_PX, startstandoff=STANDOFF_PX + STEM_PX // 2, name="halo")


def _arrow(x0: float, y0: float, x1: float, y1: float, color: str, side: str) -> dict:
    """An arrow from (x0, y0) to (x1, y1) in data coordinates, its head at the end (`side` "end+start": both)."""
    return dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="", showarrow=True,
                arrowhead=2, arrowsize=0.8, arrowwidth=STEM_PX, arrowcolor=color, arrowside=side,
                # A hair short of the box and the bar: the arrow's colour never runs into the box's edge.
                standoff=STANDOFF_PX, startstandoff=STANDOFF_PX, name="arrow")

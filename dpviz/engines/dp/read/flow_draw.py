"""Draw a flow (flow_links.flow_links) as lanes: one row per GPU, one column per step.

A GPU's nodes all sit in its own row, named once on the y axis with the rows it got, so labels never
crowd each other however many GPUs there are: a row is LANE_PX tall and its label two lines (many GPUs: one line,
ONE_LINE_LANE_PX). Columns are DataParallel's steps in order, named on the x axis. Bands carry rows (their width, to one scale)
or a whole model (a thin band of one width): the batch and the gathered output are tall nodes holding
one slice per chunk, as in a Sankey diagram. Every band and node is its own trace tagged with its step
(`meta`), so the step-through view can light the steps up one at a time.
"""
from __future__ import annotations


import numpy as np
import plotly.graph_objects as go

from dpviz.trace import Trace
from dpviz.figures.colors import IDLE_GREY, device_color, device_pattern, text_color_on, with_alpha
from dpviz.engines.dp.read.flow_links import GATHERED_KINDS, LANE_KINDS, MODEL_KINDS, TALL_KINDS, Link, Node
from dpviz.figures.layout import house_layout, merged
from dpviz.figures.sizes import BASE_TOP_PX, FONT_SIZE
from dpviz.figures.trace_words import device_name, plain_label

LABEL_SIZE = FONT_SIZE - 2  # the lanes' labels and the steps' names
LANE_PX = 44  # two lines of LABEL_SIZE text and a gap: lane labels never touch
ONE_LINE_LANE_PX = 26  # one line of it and a gap (many GPUs' labels are one line: flow.lane_labels)
PLOT_PX = 300  # the least height of the lanes together (one or two GPUs get taller lanes)
FILL = 0.7  # share of a lane the largest chunk's band takes
THICK = 0.14  # a node's width, in columns
MODEL_BAND_PX = 5  # the width of a model-sized band (a copy of the parameters, a replica's gradients)
MODEL_NODE_PX = 22  # the height of a model-sized node (the parameters, their sum, the step)
NO_ROWS_PX = 14  # the height of a replica called with no rows
CURVE = 16  # points along each edge of a band
BAND_ALPHA = 0.45
GUIDE = with_alpha("#808080", 0.5)  # node edges and lane guides: read on white and on near-black
FAILED_COLOR = "#CC3311"
# The failed replica's red outline runs on a black casing: the red has under 3:1 against some device colours
# and against their see-through bands on the dark page (1.6:1 on GPU 2's green band), black has 3.4:1 or more
# against every device colour and the red 3.6:1 against black.
FAILED_CASING = "#000000"
FAILED_PX, FAILED_CASING_PX = 3, 9  # 3 px of black outside the red: a clear edge on the smallest node too
# Pixels below the lanes: the steps' names, which turn upright when a narrow chart has no room for them
# level ("sum of gradients" about 110 px, and the tick's gap). Above them, the title block as the house look
# wraps it (layout.house_layout).
MARGIN_B = 124
PARAMETERS_ROW = -1  # the replicate step's source: GPU 0's parameters, in a row of their own above the lanes


def step_name(trace: Trace, phase: str) -> str:
    """The vocabulary's label for `phase`, without the timeline's hatch hint ('backward (×)' -> 'backward')."""
    return plain_label(trace.vocabulary.phase(phase).label)


def lane_px(rows: int, lines: int = 2) -> float:
    """Pixels per row of the chart (lanes, and the parameters' row) whose labels take `lines` lines."""
    return max(LANE_PX if lines > 1 else ONE_LINE_LANE_PX, PLOT_PX / max(rows, 1))


class Geometry:
    """Where every node and band goes, in axis units: x is the step's column, y the lane (0 at the top)."""

    def __init__(self, nodes: list[Node], steps: list[str], lanes: int, lines: int = 2):
        self.columns = {step: i for i, step in enumerate(steps)}
        self.lanes = lanes
        self.top = PARAMETERS_ROW if any(n.kind == "parameters" for n in nodes) else 0
        self.pitch = lane_px(lanes - self.top, lines)
        self.model_band, self.model_node, self.no_rows = (px / self.pitch for px in (MODEL_BAND_PX, MODEL_NODE_PX, NO_ROWS_PX))
        lane_rows = [n.rows for n in nodes if n.kind in LANE_KINDS]
        self.scale = FILL / max(max(lane_rows, default=1), 1)  # lanes per row of the batch
        self.boxes = {n.node: self._box(n) for n in nodes}
        # Lanes per row inside a node that holds a slice per chunk: the batch's is the bands' own scale;
        # the gathered output and the loss fit every row into the output device's lane.
        self.row_scale = {n.node: (self.boxes[n.node][2] - self.boxes[n.node][1]) / max(n.rows, 1)
                          for n in nodes if n.kind in TALL_KINDS}

    def _box(self, n: Node) -> tuple[float, float, float]:
        """(x, y top, y bottom) of node `n`."""
        x = self.columns[n.step]
        lane = 0 if n.lane is None else n.lane
        if n.kind in GATHERED_KINDS:  # on the output device: its lane alone, however many rows came back
            return x, lane - FILL / 2, lane + FILL / 2
        if n.kind in TALL_KINDS:
            height = max(n.rows, 1) * self.scale
            top = min(lane - FILL / 2, self.lanes - 0.5 - height)  # on its device's lane, inside the chart
            return x, max(top, -0.5), max(top, -0.5) + height
        if n.kind == "parameters":
            return x, PARAMETERS_ROW - self.model_node / 2, PARAMETERS_ROW + self.model_node / 2
        if n.kind in MODEL_KINDS:
            return x, lane - self.model_node / 2, lane + self.model_node / 2
        half = (self.no_rows if n.rows == 0 else max(n.rows * self.scale, 0.04)) / 2
        return x, lane - half, lane + half

    def end(self, node: int, kind: str, rows: int, offset: int, first_row: int) -> tuple[float, float]:
        """The (y top, y bottom) where a band of `rows` rows (0: model-sized) meets `node`."""
        _, top, bottom = self.boxes[node]
        if rows == 0:
            middle = (top + bottom) / 2
            return middle - self.model_band / 2, middle + self.model_band / 2
        scale = self.row_scale.get(node, self.scale)
        if kind in TALL_KINDS and bottom - top > rows * scale + 1e-9:
            start = top + (offset - first_row) * scale  # its slice of the batch or of the output
            return start, start + rows * scale
        return top, bottom

    def band(self, source: int, target: int, ends: tuple) -> tuple[list[float], list[float]]:
        """A closed outline from `source` to `target`, smooth at both ends, as a Sankey link is."""
        (xa, _, _), (xb, _, _) = self.boxes[source], self.boxes[target]
        (a0, a1), (b0, b1) = ends
        t = np.linspace(0.0, 1.0, CURVE)
        ease = t * t * (3 - 2 * t)
        x = xa + THICK / 2 + (xb - xa - THICK) * t
        upper, lower = a0 + (b0 - a0) * ease, a1 + (b1 - a1) * ease
        return (list(x) + list(x[::-1]) + [x[0]]), (list(upper) + list(lower[::-1]) + [upper[0]])


def _rectangle(x: float, top: float, bottom: float) -> tuple[list[float], list[float]]:
    left, right = x - THICK / 2, x + THICK / 2
    return [left, right, right, left, left], [top, top, bottom, bottom, top]


def _node_trace(n: Node, box: tuple[float, float, float], trace: Trace) -> dict:
    xs, ys = _rectangle(*box)
    device = 0 if n.lane is None else n.lane
    if n.kind == "batch":
        color = trace.vocabulary.phase("scatter").color
    else:
        color = device_color(device)
    style = dict(fill="toself", fillcolor=color, line=dict(color=GUIDE, width=1))
    if n.kind in LANE_KINDS + MODEL_KINDS + ("output", "loss") and device_pattern(device):
        style["fillpattern"] = dict(shape=device_pattern(device), fgcolor=text_color_on(color), bgcolor=color, solidity=0.25,
                                    fillmode="overlay")
    if n.kind == "no_rows" or n.kind == "failed" and n.rows == 0:  # a replica called with no tensor of the batch
        style = dict(fill="toself", fillcolor="rgba(0,0,0,0)", line=dict(color=GUIDE, width=2, dash="dot"))
    if n.kind == "failed":
        style["line"] = dict(color=FAILED_COLOR, width=FAILED_PX, dash=_failed_dash(n))
    return dict(type="scatter", x=xs, y=ys, mode="lines", hoveron="fills", name=n.hover, hoverinfo="name",
                showlegend=False, meta=dict(step=n.step, kind="node", node=n.node), **style)


def _failed_dash(n: Node) -> str:
    """A failed replica called with no rows is dotted, as the others called with none; in pixels, so the
    casing's dots fall under the outline's (plotly's "dot" grows with the line's width)."""
    return "3px,3px" if n.rows == 0 else "solid"


def _failed_casing(n: Node, box: tuple[float, float, float]) -> dict:
    """The black edge under a failed node's red outline (drawn before the node, which covers its inner half)."""
    xs, ys = _rectangle(*box)
    line = dict(color=FAILED_CASING, width=FAILED_CASING_PX, dash=_failed_dash(n))
    return dict(type="scatter", x=xs, y=ys, mode="lines", line=line, hoverinfo="skip", showlegend=False,
                meta=dict(step=n.step, kind="node", node=n.node))


def plot_flow_lanes(trace: Trace, nodes: list[Node], links: list[Link], *, steps: list[str],
                    lane_labels: list[str], idle: dict[int, str], failed_text: str | None, title: str,
                    notes: list[str]) -> go.Figure:
    """Draw nodes and links as lanes (one per GPU, labelled `lane_labels`) and columns (`steps`).
    `idle` lanes (lane -> why, as plotly text) get an idle mark in the forward column, its hover the reason; the
    failed node gets `failed_text` beside it."""
    lanes = len(lane_labels)
    lines = max(label.count("<br>") + 1 for label in lane_labels) if lane_labels else 1
    geometry = Geometry(nodes, steps, lanes, lines)
    first_row = {n.node: n.offset for n in nodes}
    kinds = {n.node: n.kind for n in nodes}
    # Every band and node as a plain dict, and the figure made from all of them at once: a flow has a
    # hundred or more traces, and adding them one by one to a Figure costs twice as long.
    traces = []
    for link in links:
        source, target, rows, offset = link.source, link.target, link.rows, link.offset
        ends = (geometry.end(source, kinds[source], rows, offset, first_row[source]),
                geometry.end(target, kinds[target], rows, offset, first_row[target]))
        xs, ys = geometry.band(source, target, ends)
        replicate = link.step == "replicate"
        color = trace.vocabulary.phase("replicate").color if replicate else device_color(link.device)
        # A copy of the parameters is a thin line: see-through, it fell to 1.5:1 on the dark page.
        band = dict(
            type="scatter", x=xs, y=ys, mode="lines", fill="toself",
            fillcolor=color if replicate else with_alpha(color, BAND_ALPHA),
            line=dict(width=0), hoveron="fills", name=link.hover, hoverinfo="name", showlegend=False,
            meta=dict(step=link.step, kind="link", source=source, target=target))
        if not replicate and device_pattern(link.device):  # GPUs 8-15: hatched, as their boxes are
            band["fillpattern"] = dict(shape=device_pattern(link.device), fillmode="overlay",
                                       bgcolor=with_alpha(color, BAND_ALPHA), fgcolor=text_color_on(color),
                                       fgopacity=0.6, solidity=0.2)
        traces.append(band)
    for n in nodes:
        if n.kind == "failed":
            traces.append(_failed_casing(n, geometry.boxes[n.node]))
        traces.append(_node_trace(n, geometry.boxes[n.node], trace))
    failed = [n for n in nodes if n.kind == "failed"]
    if failed_text and failed:
        x, top, bottom = geometry.boxes[failed[0].node]
        traces.append(dict(
            type="scatter", x=[x + THICK], y=[(top + bottom) / 2], mode="markers+text", text=[failed_text],
            textposition="middle right", marker=dict(symbol="x", size=16, color=FAILED_COLOR,
                                                     line=dict(width=1, color=FAILED_COLOR)),
            textfont=dict(size=LABEL_SIZE), hoverinfo="skip", showlegend=False, meta=dict(step="forward", kind="failure")))
    forward_x = geometry.columns.get("forward", 0)
    idle_marks = [dict(x=forward_x, y=lane, text="idle", showarrow=False, bgcolor=IDLE_GREY, borderpad=3,
                       font=dict(size=LABEL_SIZE, color=text_color_on(IDLE_GREY)),
                       hovertext=f"{why}: no replica ran there") for lane, why in idle.items()]
    rows, pitch = lanes - geometry.top, geometry.pitch
    ticks = list(range(geometry.top, lanes))
    zero = device_name(trace.lanes[0].id if trace.lanes else 0)
    texts = ([f"{zero}'s{'<br>' if lines > 1 else ' '}parameters"] if geometry.top < 0 else []) + lane_labels
    room = 1.5 if failed_text and failed else 0.5  # the error's name, right of the last column
    own = dict(
        annotations=idle_marks, hoverlabel=dict(namelength=-1),
        xaxis=dict(range=[-0.5, max(len(steps) - 1, 1) + room], tickvals=list(range(len(steps))),
                   ticktext=[step_name(trace, s) for s in steps], tickfont=dict(size=LABEL_SIZE),
                   showgrid=False, zeroline=False, fixedrange=True, showline=False,
                   # Level where the names fit, else upright: a name tilted part way keeps clear of the next
                   # along its slant, but its box spans the next column's (eight columns on a narrow chart).
                   autotickangles=[0, -90]),
        yaxis=dict(range=[lanes - 0.5, geometry.top - 0.5], tickvals=ticks, ticktext=texts,
                   tickfont=dict(size=LABEL_SIZE), showgrid=True, gridcolor=with_alpha("#808080", 0.15),
                   zeroline=False, fixedrange=True, automargin=True, ticks=""))
    # The house look (no legend, no subplot titles here) and the lanes' own sizes, in the figure as it is made:
    # the lanes keep their pixels whatever the title and the notes take above them, and nothing more is kept
    # above them.
    house = house_layout(title, notes, height=int(MARGIN_B + pitch * rows) + BASE_TOP_PX, least_top=False)
    sizes = dict(margin=dict(b=MARGIN_B, l=10, r=20), xaxis=dict(tickfont=dict(size=LABEL_SIZE)),
                 yaxis=dict(tickfont=dict(size=LABEL_SIZE)))
    return go.Figure(data=traces, layout=merged(merged(own, house), sizes))
